"""Object-store clients shared by the backends that keep content in an object store.

``ObjectStoreFilesystem`` keeps a whole workspace there, and ``SqlStore`` (with ``content_store=``) keeps
large chunks there. Neither backend may import the other, so the client they share lives here, beside
them: ``_client.py`` is what a backend asks of a store (whole-key calls mapped to built-in exceptions),
``_s3.py`` the S3 answer through ``s3fs``, ``_opening.py`` a client from an ``s3://`` URL.
"""
