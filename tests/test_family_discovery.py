"""A second model family is one new module: discovery over a package finds it, its encoder
keeps the Encoder contract, workloads built with its arithmetic have placeholder spans
equal to its encoder's rows (and place every row through the embedding routine), and the
real registries are untouched (discovery is a function of a package, not a registration).

The toy family is written as source into a temporary package next to copies of the real
family modules, exactly as a contributor would add ``families/<name>.py``.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from test_encoder_protocol import assert_encoder_contract, family_items

from vlmpath.core.errors import UnknownNameError, VlmpathError
from vlmpath.engines.pipelines import Pipeline
from vlmpath.measure import encoders as real
from vlmpath.measure.families import discover
from vlmpath.measure.fidelity import Assembler, golden_rows, score
from vlmpath.measure.workload import MediaSpec, RequestSpec, build_requests, build_workload

REAL_PACKAGE = Path(real.__file__).parent / "families"

#: 8 x 8 px patches, 32 px tiles (4 x 4 patches), 2 x 2 patches per token: 4 tokens a tile.
TOY = textwrap.dedent('''
    """A toy family: 8 px patches in 32 px tiles, 4 tokens per tile, a two-layer tower."""
    from __future__ import annotations

    import math
    from dataclasses import dataclass

    import torch

    from vlmpath.core.errors import VlmpathError
    from vlmpath.measure.families import EncodeOutput, Family, seeded_init

    PATCH, MERGE, TILE = 8, 2, 4          # tile side in patches
    PATCH_DIM = 3 * PATCH * PATCH


    def grid_for_image(height, width, scale=None):
        side = PATCH * TILE
        return (math.ceil(height / side) * math.ceil(width / side), TILE, TILE)


    def tokens_of_grid(grid):
        t, h, w = grid
        return t * h * w // (MERGE * MERGE)


    @dataclass(frozen=True)
    class ToyConfig:
        width: int
        out_dim: int
        dtype: torch.dtype


    TOWERS = {"tiny": ToyConfig(16, 24, torch.float32), "full": ToyConfig(32, 48, torch.float32)}


    class ToyTower(torch.nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.embed = torch.nn.Linear(PATCH_DIM, cfg.width)
            self.merge = torch.nn.Linear(MERGE * MERGE * cfg.width, cfg.out_dim)
            self.norm = torch.nn.LayerNorm(cfg.out_dim)

        def forward(self, patches):        # [tiles * 16, PATCH_DIM] -> [tiles * 4, out_dim]
            x = self.embed(patches).view(-1, TILE // MERGE, MERGE, TILE // MERGE, MERGE, self.embed.out_features)
            x = x.permute(0, 1, 3, 2, 4, 5).reshape(-1, MERGE * MERGE * self.embed.out_features)
            return self.norm(self.merge(x))


    def build_tower(scale, device="cpu", seed=0, weights_dir=None, config=None):
        if weights_dir is not None:
            raise VlmpathError("the toy family has no checkpoint format; drop --weights")
        cfg = config or TOWERS[scale]
        tower = ToyTower(cfg)
        seeded_init(tower, seed)
        return tower.to(device=device, dtype=cfg.dtype).eval()


    class ToyEncoder:
        name = "toy"

        def __init__(self, tower, device):
            self.tower, self.device = tower, torch.device(device)
            self.dtype = next(tower.parameters()).dtype
            self.out_dim = tower.merge.out_features

        def expected_rows(self, item):
            return sum(tokens_of_grid(g) for g in item.grid_thw)

        def encode(self, items):
            if not items:
                raise VlmpathError("encode() needs at least one item")
            with torch.no_grad():
                out = self.tower(torch.cat([it.feature for it in items]).to(self.device, self.dtype))
            return EncodeOutput(out, tuple(self.expected_rows(it) for it in items))


    FAMILY = Family(name="toy", patch=PATCH, merge=MERGE, patch_dim=PATCH_DIM,
                    grid_for_image=grid_for_image, tokens_of_grid=tokens_of_grid,
                    towers=TOWERS, build_tower=build_tower,
                    encoders={"toy": lambda tower, device, seed: ToyEncoder(tower, device)},
                    default_encoder="toy", tile_patches={"tiny": TILE, "full": TILE})
''')


@pytest.fixture
def family_package(tmp_path, monkeypatch):
    """``make({module: source})`` writes a package under ``tmp_path`` and returns its
    dotted name; its modules leave ``sys.modules`` (and ``sys.path``) afterwards."""
    made: list[str] = []
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(modules: dict[str, str]) -> str:
        name = f"fams_{tmp_path.name.replace('-', '_')}_{len(made)}"
        pkg = tmp_path / name
        pkg.mkdir()
        (pkg / "__init__.py").write_text('"""A model-family package for a test."""\n')
        for mod, source in modules.items():
            (pkg / f"{mod}.py").write_text(source)
        made.append(name)
        return name

    yield make
    for mod in [m for m in sys.modules if any(m == p or m.startswith(p + ".") for p in made)]:
        del sys.modules[mod]


def _toy(family_package):
    copies = {p.stem: p.read_text() for p in REAL_PACKAGE.glob("*.py") if not p.stem.startswith("_")}
    pkg = family_package({**copies, "toy": TOY})
    return pkg, discover(pkg)


def test_discovery_picks_up_a_new_family_module(family_package):
    real_families, real_encoders = dict(real.FAMILIES), list(real.ENCODERS)
    pkg, families = _toy(family_package)
    assert sorted(families) == sorted(set(real_families) | {"toy"})
    assert sorted(real.encoder_registry(families)) == sorted(set(real_encoders) | {"toy"})
    assert real.family_index(families)["toy"] is families["toy"]
    # the real registries are computed from vlmpath.measure.families alone, once
    assert dict(real.FAMILIES) == real_families and list(real.ENCODERS) == real_encoders
    assert "toy" not in real.ENCODERS and "toy" not in real.FAMILIES
    with pytest.raises(UnknownNameError, match="toy"):
        real.family_of("toy")
    with pytest.raises(TypeError):
        real.FAMILIES["toy"] = families["toy"]  # read-only: nothing can register into them


def test_the_toy_family_keeps_the_encoder_contract(family_package):
    _, families = _toy(family_package)
    toy = families["toy"]
    enc = toy.encoders["toy"](toy.build_tower("tiny"), "cpu", 0)
    items = family_items(toy)
    assert [it.grid_thw for it in items] == [((6, 4, 4),), ((2, 4, 4),)]
    assert_encoder_contract(enc, items)
    assert enc.encode(items).item_rows == (24, 8)  # 4 tokens per tile


def test_a_toy_workload_places_every_row(family_package, runner):
    _, families = _toy(family_package)
    toy = families["toy"]
    enc = toy.encoders["toy"](toy.build_tower("tiny"), "cpu", 0)
    image = lambda px: MediaSpec("image", (toy.grid_for_image(px, px, "tiny"),))  # noqa: E731
    specs = [RequestSpec((5, image(64), 3, image(100), 2)), RequestSpec((4, image(32), 6))]
    wl = build_workload("toy_test", "tiny", "toy", build_requests(specs, 512, 3, family=toy), 24, 512, 3)
    assert all(it.feature.shape[1] == toy.patch_dim for it in wl.items)
    golden = golden_rows(wl, enc)
    assert [it.span for it in wl.items] == [golden[it.hash].shape[0] for it in wl.items] == [16, 64, 4]
    assert len(wl.steps) > 1  # chunked: items cross step boundaries
    routine = runner.routine(wl, Pipeline(), encoder=enc)
    asm = Assembler(wl)
    for step in wl.steps:
        asm.add(step, routine.run_step(step))
    assert score(wl, asm.rows, golden, exact=True, encoder="toy").accuracy == 1.0


def test_the_toy_grid_rules_are_the_familys(family_package):
    _, families = _toy(family_package)
    toy = families["toy"]
    assert toy.check_grid([3, 4, 4], "here", "tiny") == (3, 4, 4)
    with pytest.raises(VlmpathError, match="fixed tiles of 4 x 4"):
        toy.check_grid([1, 8, 8], "here", "tiny")  # a valid Qwen grid, not a toy tile
    with pytest.raises(VlmpathError, match="no multi-region items"):
        build_requests([RequestSpec((MediaSpec("image", ((1, 4, 4),), regions=True),))], 100, 0, family=toy)


def test_a_module_without_family_is_refused(family_package):
    pkg = family_package({"toy": TOY, "helpers": "X = 1\n"})
    with pytest.raises(VlmpathError, match=r"helpers .*defines no FAMILY"):
        discover(pkg)
    assert sorted(discover(family_package({"toy": TOY, "_helpers": "X = 1\n"}))) == ["toy"]


def test_an_encoder_name_in_two_families_is_refused(family_package):
    twin = TOY.replace('name="toy"', 'name="twin"')
    with pytest.raises(VlmpathError, match="encoder 'toy' is defined by both"):
        discover(family_package({"toy": TOY, "twin": twin}))
    renamed = twin.replace('encoders={"toy":', 'encoders={"twin":').replace('default_encoder="toy"',
                                                                          'default_encoder="twin"')
    assert sorted(discover(family_package({"toy": TOY, "twin": renamed}))) == ["toy", "twin"]


def test_the_real_package_is_one_module_per_family():
    modules = sorted(p.stem for p in REAL_PACKAGE.glob("*.py") if not p.stem.startswith("_"))
    assert modules == sorted(real.FAMILIES)
