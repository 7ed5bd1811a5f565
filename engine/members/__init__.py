"""Member bots (SPEC §10, docs/member-bots.md): scheduled bots people make by asking the builder in a DM.

``charter`` (the pydantic model and its rules), ``seal`` (AES-GCM under the instance keys), ``schedule``
(when an edition is owed, with the failure backoff) and ``card`` (an edition's card, rendered) are pure;
``book`` keeps charters sealed in the store, ``feeds`` finds and reads what a charter follows."""
