"""Dialects affinec defines or re-syntaxes (imported as `affinec.dialects`)."""
