"""What autograd keeps for backward, measured with ``torch.autograd.graph.saved_tensors_hooks``.

Every tensor an operation saves for its backward passes through the pack hook. This tracker
counts unique storages (several views of one tensor are one allocation), leaves parameters and
buffers out, and attributes each storage to the module that was running when it was first
saved (``layers.3.attention``). The pack hook wraps the tensor in a :class:`Held` whose
lifetime is autograd's: it dies when autograd releases the saved tensor (after the node's
backward, or when the graph is dropped), so the tracker also knows which storages are *live* at
any moment — including those that torch.utils.checkpoint's recomputation saves during backward
— and the peak of their bytes.

Used by workers/memory.py (the ledger's activations) and workers/checkpointing.py (per-layer
bytes and the peak during a recomputing backward).
"""

from __future__ import annotations

import torch
from torch import nn


class Held:
    """A saved tensor as autograd holds it; tells the tracker when autograd lets it go."""

    __slots__ = ("tensor", "key", "tracker")

    def __init__(self, tensor: torch.Tensor, key: int, tracker: SavedTensors):
        self.tensor, self.key, self.tracker = tensor, key, tracker

    def __del__(self):
        self.tracker.release(self.key)


class SavedTensors:
    """Unique storages autograd keeps, by the module that saved them first, live and peak."""

    def __init__(self, model: nn.Module):
        self.excluded = {t.untyped_storage().data_ptr()
                         for t in [*model.parameters(), *model.buffers()]}
        self.live: dict[int, list] = {}      # storage → [bytes, module, holders]
        self.layer_bytes = 0                 # live bytes saved inside transformer layers
        self.peak_layer_bytes = 0
        self.stack = [""]
        self.handles = []
        for name, module in model.named_modules():
            self.handles.append(module.register_forward_pre_hook(self._enter(name)))
            self.handles.append(module.register_forward_hook(self._leave))

    def _enter(self, name: str):
        def hook(_module, _args) -> None:
            self.stack.append(name)
        return hook

    def _leave(self, _module, _args, _output) -> None:
        self.stack.pop()

    def hooks(self) -> torch.autograd.graph.saved_tensors_hooks:
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    def pack(self, tensor: torch.Tensor):
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if not storage.nbytes() or key in self.excluded:
            return tensor
        entry = self.live.get(key)
        if entry is None:
            entry = self.live[key] = [storage.nbytes(), self.stack[-1], 0]
            if entry[1].startswith("layers."):
                self.layer_bytes += entry[0]
                self.peak_layer_bytes = max(self.peak_layer_bytes, self.layer_bytes)
        entry[2] += 1
        return Held(tensor, key, self)

    @staticmethod
    def unpack(held) -> torch.Tensor:
        return held.tensor if isinstance(held, Held) else held

    def release(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is None:
            return
        entry[2] -= 1
        if entry[2] == 0:
            del self.live[key]
            if entry[1].startswith("layers."):
                self.layer_bytes -= entry[0]

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def total(self) -> int:
        return sum(size for size, _, _ in self.live.values())

    def by_part(self) -> dict[str, int]:
        """Live bytes by part of the model, as the ledger groups activations."""
        out: dict[str, int] = {}
        for size, module, _ in self.live.values():
            out[part(module)] = out.get(part(module), 0) + size
        return out

    def by_layer(self, layers: int) -> list[int]:
        """Live bytes saved inside each transformer layer (its checkpoint included)."""
        out = [0] * layers
        for size, module, _ in self.live.values():
            if module.startswith("layers."):
                out[int(module.split(".")[1])] += size
        return out

    def by_layer_part(self, layer: int) -> dict[str, int]:
        """Live bytes of one layer by part (norm 1, attention, …, its checkpoint)."""
        out: dict[str, int] = {}
        for size, module, _ in self.live.values():
            if module == f"layers.{layer}" or module.startswith(f"layers.{layer}."):
                out[part(module)] = out.get(part(module), 0) + size
        return out


def part(module: str) -> str:
    """The part of the model a module belongs to, as the ledger groups activations."""
    if module.startswith("embedding"):
        return "embedding"
    if module.startswith("layers."):
        inside = module.split(".", 2)[2:]
        if not inside:
            return "layer input (checkpoint)"
        return {"norm1": "norm 1", "attention": "attention", "norm2": "norm 2",
                "mlp": "MLP"}[inside[0].split(".")[0]]
    return "output"
