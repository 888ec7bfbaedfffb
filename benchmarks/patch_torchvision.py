"""Let PyPI's torchvision import next to the CPU-only torch 2.13.0 wheel (reference venv only).

The reference package imports `torchvision.datasets` at `import streaming`. The torchvision wheel
pip pairs with torch 2.13.0 is a CUDA build whose compiled ops cannot load beside the CPU torch,
and `torchvision/_meta_registrations.py` then fails on its unconditional `register_fake` calls
("operator torchvision::nms does not exist"). This rewrites those calls to go through a helper that
registers only when the ops library did load; torchvision.ops stays unusable, which no benchmark
needs. Running it again is a no-op.

usage: REF_VENV/bin/python benchmarks/patch_torchvision.py
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

MARKER = "_bench_register_fake_if_ops"
CALL = '@torch.library.register_fake("torchvision::'
HELPER = f"""

def {MARKER}(op_name):
    # Added by benchmarks/patch_torchvision.py: no fake kernels when torchvision's C ops are absent.
    if torchvision.extension._has_ops():
        return torch.library.register_fake(op_name)
    return lambda kernel: kernel
"""


def patch(path: pathlib.Path) -> int:
    """Patch one _meta_registrations.py in place; return how many decorators were rewritten."""
    source = path.read_text()
    if MARKER in source:
        return 0
    first_call = source.find(CALL)
    if first_call < 0:
        return 0
    line_start = source.rfind("\n", 0, first_call) + 1
    count = source.count(CALL)
    patched = source[:line_start] + HELPER.lstrip("\n") + "\n\n" + source[line_start:]
    path.write_text(patched.replace(CALL, f'@{MARKER}("torchvision::'))
    return count


def main() -> None:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        print("torchvision is not installed: nothing to patch")
        return
    target = pathlib.Path(spec.origin).parent / "_meta_registrations.py"
    if not target.exists():
        sys.exit(f"unexpected torchvision layout: {target} is missing")
    count = patch(target)
    print(f"patched {count} register_fake decorators in {target}" if count else f"nothing to patch in {target}")


if __name__ == "__main__":
    main()
