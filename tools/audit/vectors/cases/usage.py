"""Usage errors (exit status 2, N20): no trusted key, heads files that are refused, a
trusted-key file that holds no key or a window of another form, a bundle that cannot be
opened."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vectors.vector import Vector, usage

if TYPE_CHECKING:
    from vectors.generate import Suite


def usage_errors(suite: Suite) -> None:
    small = "bundles/real-small.jsonl"
    cases: list[tuple[str, dict[str, Any], list[str], str, str]] = [
        ("usage-no-trusted-key", {"trusted_keys": []}, ["N8", "N20"],
         "the real small run, no --trusted-key and no --trust-bundle-keys",
         "N8/N20: without a trusted key a verifier refuses to run unless told "
         "--trust-bundle-keys: exit 2"),
        ("usage-heads-file-head-not-vouched", {"known_heads": "heads/signed-by-other.jsonl"},
         ["Heads file and the head feed", "N20"],
         "a heads file whose head of the run is signed by a key that is not pinned",
         "with --trusted-key each witnessed head must verify under the pinned keys, else "
         "the file is refused: exit 2"),
        ("usage-heads-file-two-heads-at-one-sequence",
         {"known_heads": "heads/two-at-one-sequence.jsonl"},
         ["Heads file and the head feed", "N20"],
         "a heads file with two validly signed heads at sequence 3 with different hashes",
         "two heads at one sequence with different hashes are refused: exit 2"),
        ("usage-heads-file-not-signed-heads", {"known_heads": "heads/not-signed-heads.jsonl"},
         ["Heads file and the head feed", "N20"], "a heads file whose line is a manifest",
         "every line of a heads file must be a signed_head record: exit 2"),
        ("usage-trusted-key-unreadable", {"trusted_keys": ["keys/not-a-key.txt"]},
         ["N8", "N20"], "a trusted-key file holding no key",
         "N20: an unreadable trusted-key file is a usage error"),
        ("usage-trusted-key-window-not-timestamp",
         {"trusted_keys": ["keys/ledger-window-not-timestamp.signing-keys.json"]},
         ["N9", "N20"], "a pinned signing-keys file whose not_after has no fractional digits",
         "N9: windows are compared as text and must be of the one form; a trusted-key file "
         "that breaks it is unreadable (N20): exit 2"),
        ("usage-bundle-cannot-be-opened", {}, ["N20"],
         "the bundle named does not exist (bundles/absent.jsonl is never written)",
         "N20: a file that cannot be opened: exit 2"),
    ]  # fmt: skip
    for name, options, rules, change, why in cases:
        bundle = "bundles/absent.jsonl" if name == "usage-bundle-cannot-be-opened" else small
        suite.add(Vector(name, bundle, usage(), rules, change, why, **options))
