"""A line asks a bot: the one door in (``engine.run.summon``) from Matrix, the conversation as the asker could
read it, a mention, and voice notes heard before they ask."""
