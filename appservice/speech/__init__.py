"""The site's speech endpoints and what a voice message needs to know about its audio (SPEC §12)."""
