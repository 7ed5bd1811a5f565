"""Provider tests talk HTTP, through the real SDKs, to fake providers on 127.0.0.1 only (the loopback
guard in tests/conftest.py fails any test that tries to resolve another host). The ``fake`` and ``fake2``
fixtures live in tests/conftest.py, shared with the database tests that buy from them."""
