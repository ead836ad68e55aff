"""Counting one step without timing it: aten operators that launch a kernel and host syncs
(``OpCounter``, a TorchDispatchMode), the bytes autograd saves for backward (``SavedBytes``) and
the rules are in bench/cost/__init__.py's docstring."""

from __future__ import annotations

from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten


NO_KERNEL = {
    aten._unsafe_view,
    aten._reshape_alias,
    aten.lift_fresh,
    aten.empty,
    aten.empty_like,
    aten.empty_strided,
    aten.new_empty,
    aten.new_empty_strided,
    aten.resize_,
}
SYNC_OPS = {
    aten._local_scalar_dense,
    aten.nonzero,
    aten.masked_select,
    aten._unique,
    aten._unique2,
    aten.unique_dim,
    aten.unique_consecutive,
    aten.equal,
    aten.is_nonzero,
}
BOOL_INDEX_OPS = {aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_}


def _bool_indexed(args) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ())


def is_sync(func, args, kwargs, host_tensors=frozenset()) -> bool:
    """Whether this operator call reads a tensor value on the host (the rule of bench/cost/__init__.py's
    docstring); reads of ``host_tensors`` (data pointers of tensors that live on the host in
    any run, e.g. the optimizer's step counters) are not syncs."""
    packet = func.overloadpacket
    if packet is aten._local_scalar_dense and isinstance(args[0], torch.Tensor) and args[0].data_ptr() in host_tensors:
        return False
    if packet in SYNC_OPS:
        return True
    if packet in BOOL_INDEX_OPS:
        return _bool_indexed(args)
    if packet is aten.repeat_interleave and isinstance(args[0], torch.Tensor) and len(args) < 2 and kwargs.get("output_size") is None:
        return True  # repeat_interleave(repeats_tensor): the output size is read from the counts
    if packet is aten.repeat_interleave and len(args) > 1 and isinstance(args[1], torch.Tensor) and kwargs.get("output_size") is None:
        return True
    return False


def launches_kernel(func) -> bool:
    return not (func.is_view or func.overloadpacket in NO_KERNEL)


class OpCounter(TorchDispatchMode):
    """Counts the aten operators run inside it: ``ops`` (those that launch a kernel), ``syncs``
    (those that read a value on the host), ``all_ops`` and ``by_name`` (operator -> calls)."""

    def __init__(self, host_tensors=()):
        super().__init__()
        self.host_tensors = frozenset(host_tensors)
        self.ops = self.syncs = self.all_ops = 0
        self.by_name: Counter = Counter()
        self.sync_names: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.all_ops += 1
        if launches_kernel(func):
            self.ops += 1
            self.by_name[str(func.overloadpacket)] += 1
        if is_sync(func, args, kwargs, self.host_tensors):
            self.syncs += 1
            self.sync_names[str(func.overloadpacket)] += 1
        return func(*args, **kwargs)


class SavedBytes:
    """Bytes of the distinct storages autograd saves for backward while active (storages in
    ``exclude``, e.g. the parameters', left out): torch.autograd.graph.saved_tensors_hooks."""

    def __init__(self, exclude=()):
        self.exclude = {self._key(t) for t in exclude}
        self.storages: dict = {}

    @staticmethod
    def _key(t: torch.Tensor):
        s = t.untyped_storage()
        return (t.device, s.data_ptr())

    def _pack(self, t: torch.Tensor):
        try:
            key = self._key(t)
            if key not in self.exclude:
                self.storages[key] = t.untyped_storage().nbytes()
        except (RuntimeError, NotImplementedError):  # tensors without a storage (subclasses): not counted
            pass
        return t

    @property
    def nbytes(self) -> int:
        return sum(self.storages.values())

    def __enter__(self):
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        return self._hooks.__exit__(*exc)
