"""`StreamingImageNet`: ImageNet as MDS shards of ``{"x": image, "y": class index}`` samples (upstream's dataset)."""

from streaming.vision.base import StreamingVisionDataset

__all__ = ["StreamingImageNet"]


class StreamingImageNet(StreamingVisionDataset):
    """ImageNet, streamed; each item is ``(transform(x), target_transform(y))``: see :class:`StreamingVisionDataset`."""
