"""A run's data: splits held in memory and served in batches, read from the built-in datasets or
the user's own, cached on disk, loaded through FFCV, or subset by CORDS.

- ``splits``: train/validation/test splits as uint8 tensors, batches and augmentation;
- ``datasets``: the built-in datasets' readers; ``userdata``: the user's own (image folders,
  ``npz``, ``hf``, an import path); ``decode``: images decoded with PIL; ``imagecache``: decoded
  images cached on disk; ``cachefolder``: a cache's folder and lock, left behind by no refusal;
  ``memory``: the host-memory check; ``stratify``: why a stratified split of a user's classes
  failed, and what to do;
- ``betons``, ``ffcv_loader``: FFCV's files and its training loader;
- ``selection``, ``cords_compat``: CORDS data-subset selection, and what makes cords 0.0.4 run.
"""

__all__ = [
    "betons",
    "cachefolder",
    "cords_compat",
    "datasets",
    "decode",
    "ffcv_loader",
    "imagecache",
    "memory",
    "selection",
    "splits",
    "stratify",
    "userdata",
]
