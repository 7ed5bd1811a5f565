"""Rules for bridged social conversations (SPEC §14, docs/social.md): a surface of its own on the seam."""
