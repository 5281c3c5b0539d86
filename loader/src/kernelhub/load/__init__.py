"""Loading a kernel as a pipeline of typed steps, one module per step.

    request  (caller's words)        → KernelRequest   checked; nothing asked yet
    resolve  KernelRequest           → Resolution      the commit, its variants, the pick
    fetch    Resolution              → Fetched         the variant in the cache
    verify   Fetched                 → Snapshot        read once, digests checked, validated
    import   Snapshot                → module          executed from the snapshot's bytes

Each value changes form once and is never re-read: the snapshot taken by ``verify`` is
the only read of the variant's files, every check runs on it, and what is imported is
exactly those bytes. The checks are :mod:`kernelhub.load.validators` (trust, signature,
lock digest, arch, ...), behind one protocol, chosen for a request in one place;
:mod:`kernelhub.load.pipeline` strings the steps together top to bottom, and
:mod:`kernelhub.api` is the public surface over it.
"""
