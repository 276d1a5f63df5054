"""A device rehearsal: the trainer's tensors on an accelerator this machine does not have.

Nothing in a CPU-only suite ever puts a tensor on a GPU, so a CPU tensor meeting a CUDA one
(`torch.stack([cuda_scalar, torch.tensor(n)])`) passes every test and crashes the first GPU run.
Here the trainer runs on `rehearsal:0`, torch's PrivateUse1 key set up as a Python backend
(`torch.utils.backend_registration._setup_privateuseone_for_python_backend`, the hook PyTorch's
own tests use), so autograd, `torch.device` and the distributed state-dict helpers treat it as
an accelerator. Each tensor on it is a wrapper holding its values in a CPU tensor, and every op
runs twice:

1. on `meta` tensors standing in for the device ones, beside the real CPU tensors: meta tensors
   go through ATen's own checks (TensorIterator's, the structured kernels'), so a mix that a
   CUDA kernel refuses raises here as it would on a GPU ("Tensor on device cpu is not on the
   expected device meta!"), and a CPU 0-dim scalar where ATen allows one passes. Ops with a
   CUDA kernel and no `device_check: NoCheck` in ATen's native_functions.yaml (shipped with
   torch as torchgen/packaged) also get the check torchgen writes into each CUDA kernel: every
   tensor argument on one device ("Expected all tensors to be on the same device");
2. on the held CPU values, for the numbers the loop reads back.

Outputs ATen put on the device are wrapped again. Crossing devices on purpose (`.to()`,
`copy_`, `.item()`) is allowed, as ATen allows it. Autocast on the device follows CUDA's
lower-precision list for the matmul ops this model uses (`aten/src/ATen/autocast_mode.cpp`).

torch cannot unregister a backend, and the rename makes `rehearsal` this process's accelerator
(`torch.accelerator`), so the rehearsal runs in a process of its own:
`python -m tests.trainer.device_rehearsal train ARGS` trains with `--device rehearsal`, and
`python -m tests.trainer.device_rehearsal rules` prints, as JSON, how the device answers the
mixes that ATen allows and refuses (tests/trainer/test_trainer_device.py checks both).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import torch
import yaml
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, return_and_correct_aliasing
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten
from torch.utils.backend_registration import (
    _DummyBackendModule,
    _setup_privateuseone_for_python_backend,
)

BACKEND: Final = "rehearsal"  # the PrivateUse1 key renamed (once per process)
_META: Final = torch.device("meta")
_CPU: Final = torch.device("cpu")
aten = torch.ops.aten

# Ops that may cross devices (ATen allows them): not replayed on meta.
_CROSSING: Final = frozenset(
    {aten._to_copy.default, aten.copy_.default, aten._local_scalar_dense.default}
)
# CUDA autocast's lower-precision ops among those this model and torchao call.
_AUTOCAST_LOW: Final = (
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "matmul",
    "linear",
    "scaled_dot_product_attention",
)


def _on_device(value: Any) -> bool:
    return isinstance(value, torch.device) and value.type == BACKEND


class OnDevice(torch.Tensor):
    """A tensor on the rehearsal device; its values live in `held`, a CPU tensor."""

    held: torch.Tensor

    @staticmethod
    def __new__(cls, held: torch.Tensor) -> OnDevice:
        out = torch.Tensor._make_wrapper_subclass(
            cls,
            held.shape,
            strides=held.stride(),
            storage_offset=held.storage_offset(),
            dtype=held.dtype,
            layout=held.layout,
            device=torch.device(BACKEND, 0),
            requires_grad=held.requires_grad,
        )
        out.held = held
        return out

    def __repr__(self) -> str:  # type: ignore[override]
        return f"OnDevice({self.held!r})"

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        return _run(func, args, kwargs or {})


def _as_meta(value: Any) -> Any:
    if isinstance(value, OnDevice):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=_META)
    return _META if _on_device(value) else value


def _as_cpu(value: Any) -> Any:
    if isinstance(value, OnDevice):
        return value.held
    return _CPU if _on_device(value) else value


def _wrap_like(out: Any, placed: Any) -> Any:
    """Wrap each tensor of `out` whose counterpart in `placed` is on the meta device."""
    flat_out, spec = tree_flatten(out)
    flat_placed, _ = tree_flatten(placed)
    wrapped = [
        OnDevice(o)
        if isinstance(o, torch.Tensor) and isinstance(p, torch.Tensor) and p.device == _META
        else o
        for o, p in zip(flat_out, flat_placed, strict=True)
    ]
    return tree_unflatten(wrapped, spec)


@functools.cache
def _checked_ops() -> frozenset[str]:
    """`name.overload` of the ops whose CUDA kernel torchgen wraps in a same-device check."""
    spec = importlib.util.find_spec("torchgen")  # shipped with torch; not imported
    assert spec is not None and spec.origin is not None
    yaml_path = Path(spec.origin).parent / "packaged/ATen/native/native_functions.yaml"
    checked = set()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: 10x faster on 600 KB
    for entry in yaml.load(yaml_path.read_text(), Loader=loader):  # noqa: S506 - a safe loader
        keys = ",".join(entry.get("dispatch", {})).replace(" ", "").split(",")
        has_cuda = "CUDA" in keys or "structured_delegate" in entry
        if has_cuda and entry.get("device_check") != "NoCheck":
            checked.add(entry["func"].split("(", 1)[0])
    return frozenset(checked)


def _same_device(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    schema = func._schema
    name = schema.name.split("::", 1)[-1]
    if (f"{name}.{schema.overload_name}" if schema.overload_name else name) not in _checked_ops():
        return
    flat, _ = tree_flatten((args, kwargs))
    devices = list(dict.fromkeys(t.device for t in flat if isinstance(t, torch.Tensor)))
    if len(devices) > 1:
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"{devices[0]} and {devices[1]}! (in {schema.name})"
        )


def _run(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if func in _CROSSING:
        return _cross(func, args, kwargs)
    _same_device(func, args, kwargs)
    placed = func(*tree_map(_as_meta, args), **tree_map(_as_meta, kwargs))  # ATen's checks
    out = func(*tree_map(_as_cpu, args), **tree_map(_as_cpu, kwargs))
    wrapped = _wrap_like(out, placed)
    return return_and_correct_aliasing(func, args, kwargs, wrapped)  # type: ignore[no-untyped-call]


def _cross(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    out = func(*tree_map(_as_cpu, args), **tree_map(_as_cpu, kwargs))
    if func is aten.copy_.default:
        return args[0]
    if func is aten._to_copy.default:
        target = kwargs.get("device")
        lands_on_device = _on_device(target) or (target is None and isinstance(args[0], OnDevice))
        return OnDevice(out) if lands_on_device else out
    return out  # .item(): a number on the host


class _Dispatch(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Routes every op touching the device (a wrapper or a `device=` argument) through `_run`."""

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        if any(isinstance(v, OnDevice) or _on_device(v) for v in flat):
            return _run(func, args, kwargs)
        return func(*args, **kwargs)


_FROM_DATA: Final = frozenset({torch.tensor, torch.as_tensor, torch.asarray})


class _Factories(TorchFunctionMode):
    """Tensors built from Python data skip the dispatcher's modes: build them on the CPU and
    wrap them. `.tolist()` reads the held values (the wrapper has no storage of its own);
    `.numpy()` of a device tensor is refused, as on CUDA."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        target = kwargs.get("device")
        if func in _FROM_DATA and target is not None and torch.device(target).type == BACKEND:
            kwargs["device"] = _CPU
            return OnDevice(func(*args, **kwargs))
        if func is torch.Tensor.new_tensor and isinstance(args[0], OnDevice):
            device = kwargs.pop("device", None)
            dtype = kwargs.pop("dtype", args[0].dtype)
            if device is None or torch.device(device).type == BACKEND:
                return OnDevice(torch.tensor(args[1], dtype=dtype, device=_CPU, **kwargs))
        if func is torch.Tensor.tolist and isinstance(args[0], OnDevice):
            return args[0].held.tolist()
        if func is torch.Tensor.numpy and isinstance(args[0], OnDevice):
            raise TypeError(
                f"can't convert {BACKEND}:0 device type tensor to numpy. Use Tensor.cpu() to copy "
                "the tensor to host memory first."
            )
        return func(*args, **kwargs)


class _Backend(_DummyBackendModule):
    """The device module torch asks for AMP support."""

    def get_amp_supported_dtype(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float16]


_AUTOCAST_KEY: Final = "AutocastPrivateUse1"
_libraries: list[torch.library.Library] = []


def _autocast_kernel(op: Any) -> Callable[..., Any]:
    """Cast floating tensors to the autocast dtype, then run below autocast (CUDA's rule for
    its lower-precision ops)."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        dtype = torch.get_autocast_dtype(BACKEND)

        def cast(v: Any) -> Any:
            floating = isinstance(v, torch.Tensor) and v.is_floating_point()
            return v.to(dtype) if floating and v.dtype in (torch.float32, torch.float64) else v

        keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)  # type: ignore[attr-defined]
        with torch._C._ExcludeDispatchKeyGuard(keys):
            return op(*tree_map(cast, args), **tree_map(cast, kwargs))

    return kernel


def _register_once() -> None:
    if _libraries:
        return
    _setup_privateuseone_for_python_backend(rename=BACKEND, backend_module=_Backend())
    # the libraries live as long as the process (kept in _libraries)
    fallback = torch.library.Library("_", "IMPL")  # type: ignore[no-untyped-call]
    fallback.fallback(  # type: ignore[no-untyped-call]
        torch.library.fallthrough_kernel, dispatch_key=_AUTOCAST_KEY
    )
    lib = torch.library.Library("aten", "IMPL")  # type: ignore[no-untyped-call]
    for name in _AUTOCAST_LOW:
        packet = getattr(aten, name)
        for overload in packet.overloads():
            op = getattr(packet, overload)
            lib.impl(op, _autocast_kernel(op), _AUTOCAST_KEY)  # type: ignore[no-untyped-call]
    _libraries.extend((fallback, lib))


@contextlib.contextmanager
def rehearsal() -> Iterator[torch.device]:
    """Within: `rehearsal:0` (yielded) works like an accelerator with ATen's device rules."""
    _register_once()
    with _Dispatch(), _Factories():  # type: ignore[no-untyped-call]
        yield torch.device(BACKEND, 0)


def _outcome(attempt: Callable[[], object]) -> str:
    """ "allowed", or the first line of the error the device raised."""
    try:
        attempt()
    except (RuntimeError, TypeError) as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return "allowed"


def rules() -> dict[str, str]:
    """How the device answers each kind of mix (run in this module's own process)."""
    with rehearsal() as dev:
        x = torch.ones(3, device=dev)
        weight = torch.nn.Parameter(torch.ones(2, 2, device=dev))
        (weight * 3).sum().backward()  # type: ignore[no-untyped-call]
        grad = weight.grad
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            product = x.view(1, 3) @ x.view(3, 1)
        return {
            "device": str(x.device),
            "sum": str((x * 2).sum().item()),
            "add a CPU scalar": str((x + torch.tensor(2.0)).device),
            "stack with a CPU scalar": _outcome(lambda: torch.stack([x.sum(), torch.tensor(1.0)])),
            "add a CPU vector": _outcome(lambda: x + torch.ones(3)),
            "index with a CPU index": _outcome(lambda: x.index_select(0, torch.tensor([0]))),
            "to the host": str(x.cpu().device) + " " + str(x.cpu().tolist()),
            "tensor(device=)": str(torch.tensor([1.0], device=dev).device),
            "autocast matmul": str(product.dtype),
            "numpy": _outcome(x.numpy),
            "grad": "none" if grad is None else f"{grad.device} {grad.cpu().tolist()}",
        }


def _train(argv: list[str]) -> int:
    """`trainer train ARGV` with `--device rehearsal` meaning the rehearsal device; the CUDA
    queries (name, compute capability) are what cannot be faked, so the device is named."""
    from trainer import cli, distributed, machine
    from trainer.fp8.converters import Fp8Converter
    from trainer.precision import Plan

    with rehearsal() as dev:
        real_resolve, real_check = distributed.resolve_device, machine.check_device

        def resolve(name: str, local_rank: int) -> torch.device:
            return dev if name == dev.type else real_resolve(name, local_rank)

        def check(plan: Plan, device: torch.device, converter: Fp8Converter | None = None) -> str:
            return "rehearsal device" if device == dev else real_check(plan, device, converter)

        distributed.resolve_device = resolve
        machine.check_device = check
        return cli.main(["train", *argv], restore_signals=False)


if __name__ == "__main__":
    if sys.argv[1:2] == ["rules"]:
        print(json.dumps(rules()))
        sys.exit(0)
    if sys.argv[1:2] == ["train"]:
        sys.exit(_train(sys.argv[2:]))
    sys.exit("usage: python -m tests.trainer.device_rehearsal {rules,train ARGS}")
