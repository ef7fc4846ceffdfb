"""The library files a remote run executed, for the server's static rules (issue 32).

On a remote target the server cannot read the host's site-packages. ``digests`` gives each
``library_files`` entry of a result its sha256 and size (asked for by the request's
``library_digests`` option, which the SSH target sets); ``contents`` answers the server's
``files`` request with the bytes of the digests it does not have cached yet, over the agent's
own connection.
"""
