"""The vectors, one module per group of related sections of docs/formats.md. Each section is a
function taking the ``Suite`` (generate.py) and adding its vectors with ``suite.add`` (a vector
over a bundle already written) or ``suite.case`` (a hand-built ``bundles/<name>.jsonl``);
``Suite.build`` calls them in a fixed order, which is the order of the index.

- real.py: the real bundles and the compact admitted run
- lines.py: reading lines (N1, "Primitives", "File layout") and the 24 MiB bound
- records.py: section order (N3), the manifest, run and signing-keys records
- journal.py: sequences, links, hashes, payloads and the command ledger (N10, N11, N16)
- signatures.py: signed heads, their keys and windows, the /2 signature chain (N8, N9, N12)
- heads.py: coverage by signed heads (N13), witnessed heads, the journal's end (N15)
- admission.py: policies (N17), settlements and claims (N14), tickets (N19)
- blobs.py: blob records and the N18 reference walk
- trailer.py: the trailer
- usage.py: usage errors (N20)
- edits.py: the edits several of them share
"""
