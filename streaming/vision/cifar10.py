"""`StreamingCIFAR10`: CIFAR-10 as MDS shards of ``{"x": image, "y": class index}`` samples (upstream's dataset)."""

from streaming.vision.base import StreamingVisionDataset

__all__ = ["StreamingCIFAR10"]


class StreamingCIFAR10(StreamingVisionDataset):
    """CIFAR-10, streamed; each item is ``(transform(x), target_transform(y))``: see :class:`StreamingVisionDataset`."""
