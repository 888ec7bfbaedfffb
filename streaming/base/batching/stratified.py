"""Upstream import path `streaming.base.batching.stratified`."""

from streaming.dataset.batching import generate_work_stratified_batching

__all__ = ["generate_work_stratified_batching"]
