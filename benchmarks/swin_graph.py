"""A Swin Transformer (Liu et al. 2021) as a pipeline graph: shifted-window attention (a script).

    python benchmarks/swin_graph.py OUT.json.gz [--depths 2,2,6,2] [--memory-null]

Needs torch (``pip install torch==2.13.0`` on CPU-only machines). Builds Swin-T (embedding 96,
depths 2-2-6-2, heads 3-6-12-24, window 7) with random weights in plain torch, written the
way torchvision 0.28 writes it: each block builds its shifted-window mask from the input's
shape in its forward pass (``new_zeros``, slice fills) and gathers its relative-position
bias from a table, so the export holds many small sources, sinks and views next to the big
activations, as real exports do. Exports batch 1, 224 x 224, fp32 with ``torch.export`` and
imports it with ``launch.py import torch`` on ``benchmarks/chiplet.toml`` (the shared data's
chiplet: 4 TFLOP/s, 400 GB/s, 25 GB/s between stages, 32 MiB per stage); ``--memory-null``
drops the memory limit afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]


class WindowAttention(nn.Module):
    def __init__(self, dim: int, heads: int, window: int, shift: int) -> None:
        super().__init__()
        self.heads, self.window, self.shift = heads, window, shift
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
        self.register_buffer("index", (rel[..., 0] * (2 * window - 1) + rel[..., 1]).flatten(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        ws, s = self.window, self.shift
        pad_h, pad_w = (ws - h % ws) % ws, (ws - w % ws) % ws
        x = F.pad(x, (0, 0, 0, pad_w, 0, pad_h))
        ph, pw = h + pad_h, w + pad_w
        if s:
            x = torch.roll(x, shifts=(-s, -s), dims=(1, 2))
        nw = (ph // ws) * (pw // ws)
        x = x.view(b, ph // ws, ws, pw // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b * nw, ws * ws, c)
        qkv = self.qkv(x).reshape(x.size(0), x.size(1), 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0] * (c // self.heads) ** -0.5, qkv[1], qkv[2]
        attn = q.matmul(k.transpose(-2, -1))
        bias = self.table[self.index].view(ws * ws, ws * ws, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
        attn = attn + bias
        if s:
            mask = x.new_zeros((ph, pw))
            spans = ((0, -ws), (-ws, -s), (-s, None))
            count = 0
            for hs in spans:
                for wsl in spans:
                    mask[hs[0]:hs[1], wsl[0]:wsl[1]] = count
                    count += 1
            mask = mask.view(ph // ws, ws, pw // ws, ws).permute(0, 2, 1, 3).reshape(nw, ws * ws)
            mask = mask.unsqueeze(1) - mask.unsqueeze(2)
            mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
            attn = attn.view(x.size(0) // nw, nw, self.heads, x.size(1), x.size(1)) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.heads, x.size(1), x.size(1))
        x = attn.softmax(dim=-1).matmul(v).transpose(1, 2).reshape(x.size(0), x.size(1), c)
        x = self.proj(x)
        x = x.view(b, ph // ws, pw // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, ph, pw, c)
        if s:
            x = torch.roll(x, shifts=(s, s), dims=(1, 2))
        return x[:, :h, :w, :].contiguous()


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, res: int, shift: int) -> None:
        super().__init__()
        window = min(7, res)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, heads, window, 0 if res <= 7 else shift)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Merge(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm, self.red = nn.LayerNorm(4 * dim), nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        return self.red(self.norm(x))


class Swin(nn.Module):
    def __init__(self, depths: tuple[int, ...] = (2, 2, 6, 2), dim: int = 96, heads: tuple[int, ...] = (3, 6, 12, 24)):
        super().__init__()
        self.embed, self.norm0 = nn.Conv2d(3, dim, 4, 4), nn.LayerNorm(dim)
        layers: list[nn.Module] = []
        res = 56
        for i, (d, h) in enumerate(zip(depths, heads)):
            layers += [Block(dim, h, res, 0 if j % 2 == 0 else 3) for j in range(d)]
            if i < len(depths) - 1:
                layers.append(Merge(dim))
                dim, res = 2 * dim, res // 2
        self.layers = nn.Sequential(*layers)
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 1000)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        x = self.norm0(self.embed(img).permute(0, 2, 3, 1))
        x = self.norm(self.layers(x))
        return self.head(x.mean(dim=(1, 2)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--depths", default="2,2,6,2")
    ap.add_argument("--memory-null", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    model = Swin(tuple(int(d) for d in a.depths.split(","))).eval()
    with tempfile.TemporaryDirectory() as tmp:
        prog = Path(tmp) / "swin.pt2"
        torch.export.save(torch.export.export(model, (torch.randn(1, 3, 224, 224),)), str(prog))
        subprocess.run([sys.executable, str(ROOT / "launch.py"), "import", "torch", str(prog), "--chip",
                        str(ROOT / "benchmarks" / "chiplet.toml"), "--out", a.out], check=True)
    if a.memory_null:
        from gapstop.problems.pipeline.io import load_graph, save_graph

        save_graph(dataclasses.replace(load_graph(a.out), memory=None), a.out)


if __name__ == "__main__":
    main()
