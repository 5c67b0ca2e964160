"""The runners: sweeps on Apache Beam and the one-command Kaggle submission job.

They run the project's training, evaluation and ranking scripts for any
collection, handed its `CollectionSpec` (`collections.py`): `tile_spec.py` and
`layout_spec.py` hold each collection's. The core imports nothing from here.
"""
