"""forge_audit: the offline verifier of a Forge continuity audit bundle.

It is written from docs/formats.md alone ("Audit bundle") and imports nothing of the services or
their shared code, so a bundle can be checked by a party that trusts none of them: only the
Python standard library, ``rfc8785`` (RFC 8785 canonical JSON) and ``cryptography`` (Ed25519).
"""

BUNDLE_FORMAT = "forge.continuity.audit-bundle/1"
SIGNED_HEAD_FORMAT = "forge.continuity.signed-head/2"
SIGNED_HEAD_FORMAT_V1 = "forge.continuity.signed-head/1"
SIGNING_KEYS_FORMAT = "forge.continuity.signing-keys/1"
HEADS_FORMAT = "forge.continuity.heads/1"
