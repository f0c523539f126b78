"""The triage shim: a directory put first on PYTHONPATH, holding only its sitecustomize.py."""
