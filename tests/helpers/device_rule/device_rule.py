"""NCCL's device rule, kept on a CPU (tests only: never in an image).

On a GPU node a tensor is on the GPU only when it was made there (``device=``), moved there
(``.to``, ``.cuda``) or computed from one that is. NCCL refuses every other tensor
("No backend type associated with device type cpu"), and an operation that mixes a GPU tensor
with a CPU tensor of more than one element fails too. On a CPU everything is on the CPU: gloo
takes whatever it gets, and a script that dies at its first collective on a GPU passes.

This module keeps the account a GPU would keep. A TorchFunctionMode marks each tensor placed on
the training device (``RULE_DEVICE``, default ``cpu``) or computed from a marked one. The code
under watch (``RULE_WATCH``: folders, ``:``-separated) is then held to the rule: a collective of
torch.distributed it calls (itself, or through DeepSpeed's or Accelerate's thin wrappers)
refuses an unmarked tensor, an operation it calls refuses a mix of marked and unmarked tensors,
and ``.numpy()`` of a marked one. The error names the line that handed the tensor over.

Only the watched code: the mode does not see inside autograd's backward pass (a library's
gradient buckets made in a backward hook would look like CPU tensors), and the libraries'
own collectives are theirs to prove on GPUs.

Lenient where a CPU cannot tell: ``device="cpu"`` or ``.to("cpu")`` written out counts as the
training device, and ``x.to(device)`` whose result is dropped still marks ``x`` (on a CPU ``.to``
returns ``x`` itself). ``.cpu()`` of a marked tensor returns an unmarked copy, as on a GPU.

Installed by ``sitecustomize.py`` beside it when the tests put this folder on PYTHONPATH.
"""

import functools
import os
import sys

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

DEVICE_TYPE = torch.device(os.environ.get("RULE_DEVICE", "cpu")).type
WATCHED = tuple(os.path.realpath(folder) + os.sep for folder in os.environ.get("RULE_WATCH", "").split(":") if folder)
TORCH = os.path.dirname(torch.__file__) + os.sep
OWN = {__file__, os.path.realpath(__file__)}  # this module's frames, as its code objects name it

# made on the CPU unless told otherwise, whatever their data
FACTORIES = {
    torch.tensor,
    torch.as_tensor,
    torch.zeros,
    torch.ones,
    torch.empty,
    torch.full,
    torch.arange,
    torch.linspace,
    torch.logspace,
    torch.eye,
    torch.rand,
    torch.randn,
    torch.randint,
    torch.randperm,
    torch.from_numpy,
}
# cross the boundary on purpose: a mix of devices is what they are for
MOVES = {torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda, torch.Tensor.copy_, torch.Tensor.numpy}
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_to_all",
    "all_to_all_single",
    "broadcast",
    "gather",
    "irecv",
    "isend",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "send",
)

_on_device = WeakIdKeyDictionary()


class DeviceRuleError(RuntimeError):
    pass


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def on_device(tensor):
    return tensor in _on_device


def _mark(value, placed):
    if placed:
        for tensor in _tensors(value):
            _on_device[tensor] = True


def _placed_by_to(args, kwargs):
    """True/False when `.to(...)` names a device (or a tensor to follow), None when it only casts."""
    try:
        device = torch._C._nn._parse_to(*args[1:], **{k: v for k, v in kwargs.items() if k != "copy"})[0]
    except Exception:
        return None
    if device is None:
        return None
    followed = next((value for value in (*args[1:], *kwargs.values()) if isinstance(value, torch.Tensor)), None)
    if followed is not None:
        return on_device(followed)
    return torch.device(device).type == DEVICE_TYPE


# libraries' collectives that only pass a caller's tensor on: the caller above them is judged
PASS_THROUGH = tuple(
    os.sep + os.path.join(*part.split("/"))
    for part in ("deepspeed/comm/", "accelerate/utils/operations.py", "accelerate/accelerator.py")
)


def _caller(skip=()):
    """(file, line) of the first frame outside torch, this module and `skip`: who handed the
    tensor over."""
    frame = sys._getframe(2)
    while frame:
        name = frame.f_code.co_filename
        if not (name.startswith(TORCH) or name in OWN or any(part in name for part in skip)):
            break
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame else ("?", 0)


def _watched(filename):
    return bool(WATCHED) and os.path.realpath(filename).startswith(WATCHED)


class DeviceRule(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if WATCHED and func not in MOVES:
            self._refuse_a_mix(func, args, kwargs)
        if func is torch.Tensor.numpy and args and on_device(args[0]):
            filename, line = _caller()
            if _watched(filename):
                raise DeviceRuleError(
                    f"device rule: {filename}:{line}: .numpy() of a tensor on the training device "
                    "(on a GPU: can't convert cuda tensor to numpy; use .cpu() first)"
                )
        result = func(*args, **kwargs)
        if kwargs.get("device") is not None:
            _mark(result, torch.device(kwargs["device"]).type == DEVICE_TYPE)
        elif func is torch.Tensor.to:
            placed = _placed_by_to(args, kwargs)
            _mark(result, on_device(args[0]) if placed is None else placed)
        elif func is torch.Tensor.cpu:
            if result is args[0] and on_device(result):
                # on a GPU .cpu() makes a copy off the device and the original stays; here it
                # would hand back the original itself, so a copy stands for the GPU's
                result = result.clone()
        elif func is torch.Tensor.cuda:
            _mark(result, True)
        elif func in FACTORIES:
            pass  # on the CPU, as on a GPU node
        else:
            _mark(result, any(on_device(tensor) for tensor in _tensors((args, kwargs))))
        return result

    @staticmethod
    def _refuse_a_mix(func, args, kwargs):
        tensors = list(_tensors((args, kwargs)))
        if len(tensors) < 2:
            return
        placed = [on_device(tensor) for tensor in tensors]
        if not any(placed):
            return
        strays = [tensor for tensor, here in zip(tensors, placed) if not here and tensor.dim() > 0]
        if not strays:
            return
        filename, line = _caller()
        if _watched(filename):
            raise DeviceRuleError(
                f"device rule: {filename}:{line}: {getattr(func, '__name__', func)} mixes a tensor on the training "
                f"device with a {tuple(strays[0].shape)} tensor that is not (on a GPU: Expected all tensors to be "
                "on the same device)"
            )


def _checked(name, collective):
    @functools.wraps(collective)
    def checked(*args, **kwargs):
        filename, line = _caller(PASS_THROUGH)
        if not _watched(filename):
            return collective(*args, **kwargs)
        for tensor in _tensors((args, kwargs)):
            if not on_device(tensor):
                raise DeviceRuleError(
                    f"device rule: {filename}:{line}: torch.distributed.{name} got a {tuple(tensor.shape)} "
                    f"{tensor.dtype} tensor that is not on the training device (NCCL: No backend type associated "
                    "with device type cpu)"
                )
        return collective(*args, **kwargs)

    checked.device_rule = True
    return checked


def _parameter_keeps_the_mark():
    """nn.Parameter(data) is made in C++ (_make_subclass), out of the mode's sight."""
    parameter = torch.nn.Parameter
    made = parameter.__new__

    def new(cls, data=None, requires_grad=True):
        result = made(cls, data, requires_grad)
        if data is not None and on_device(data):
            _on_device[result] = True
        return result

    parameter.__new__ = staticmethod(new)


def install():
    """Wrap the collectives (in torch.distributed and in distributed_c10d, whose own helpers call
    them) and enter the mode for the rest of the process."""
    _parameter_keeps_the_mark()
    c10d = dist.distributed_c10d
    for name in COLLECTIVES:
        original = getattr(c10d, name, None)
        if original is None or getattr(original, "device_rule", False):
            continue
        checked = _checked(name, original)
        setattr(c10d, name, checked)
        if getattr(dist, name, None) is original:
            setattr(dist, name, checked)
    DeviceRule().__enter__()
