"""Who may publish what a load runs: the orgs trusted for remote code and their signing
keys (``trust``), the policy that checks a release's signature (``policy``: SSH
signatures, ``sshsig``; sigstore bundles, ``sigstore``), and the marks that remember a
verified result for this user (``verified_marks``). The release manifest they check is a
format shared with the builder: :mod:`kernelhub.formats.release_manifest`."""
