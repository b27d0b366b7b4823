"""`enigma.torch_ops`: the library's operations as torch custom operators
(`torch.ops.enigma.*`) with fake implementations, inside `torch.compile`.

A small module built of several of them is compiled with
``backend="aot_eager"`` on CPU tensors (enigma's simulator) and, where CUDA
is present, with the default inductor backend on CUDA tensors (enigma's
CUDA kernels); both are compared with the same module written with
torch's own operators. A recording backend checks that dynamo keeps the
enigma operators in one graph (no graph break), and ``torch.library.opcheck``
checks each operator's schema and fake implementation against its real one.
torch is not a dependency of the package: without it these tests skip."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (CI does not install it); the lead runs this on the H200")
F = torch.nn.functional
enigma_ops = pytest.importorskip("enigma.torch_ops")

CUDA = torch.cuda.is_available()


class Block(torch.nn.Module):
    """matmul → GELU → LayerNorm → residual add → softmax and a row sum,
    each through ``torch.ops.enigma`` (``mine=True``) or torch."""

    def __init__(self, d_in=48, d=40, mine=True):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(d_in, d, generator=g) / d_in ** 0.5, requires_grad=False)
        self.g = torch.nn.Parameter(torch.rand(d, generator=g) + 0.5, requires_grad=False)
        self.b = torch.nn.Parameter(torch.randn(d, generator=g) * 0.1, requires_grad=False)
        self.mine = mine

    def forward(self, x):
        e = torch.ops.enigma
        if self.mine:
            h = e.gelu(e.matmul(x, self.w))
            h = e.add(e.layer_norm(h, [h.shape[-1]], self.g, self.b, 1e-5), h)
            return e.softmax(h, -1), e.sum(h, [-1], False), e.argmax(h, -1, False)
        h = F.gelu(x @ self.w)
        h = F.layer_norm(h, (h.shape[-1],), self.g, self.b, 1e-5) + h
        return torch.softmax(h, -1), h.sum(-1), torch.argmax(h, -1).to(torch.int32)


def check_against_torch(got, want, tol):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if g.dtype == torch.int32:
            # Ties aside, the same indices.
            assert (g == w).float().mean() > 0.95
        else:
            torch.testing.assert_close(g.float().cpu(), w.float().cpu(), rtol=tol, atol=tol)


def test_the_operators_are_registered():
    for name in ("relu", "gelu", "add", "sum", "argmax", "cumsum", "softmax", "log_softmax", "rms_norm", "layer_norm",
                 "matmul", "bmm", "cross_entropy", "max_pool2d", "avg_pool2d", "conv2d", "scaled_dot_product_attention"):
        assert name in enigma_ops.OPERATORS
        assert hasattr(torch.ops.enigma, name)


def test_dynamo_keeps_enigma_operators_in_one_graph():
    graphs = []

    def recording(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    x = torch.randn(3, 5, 48)
    torch._dynamo.reset()
    torch.compile(Block(), backend=recording, fullgraph=True)(x)
    assert len(graphs) == 1
    # The operators, as overloads (".default") or packets, whichever dynamo records.
    targets = {str(n.target).removesuffix(".default") for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert {"enigma.matmul", "enigma.gelu", "enigma.layer_norm", "enigma.add", "enigma.softmax", "enigma.sum", "enigma.argmax"} <= targets, targets


def test_aot_eager_on_cpu_tensors_through_the_simulator():
    x = torch.randn(3, 5, 48)
    torch._dynamo.reset()
    got = torch.compile(Block(), backend="aot_eager", fullgraph=True)(x)
    check_against_torch(got, Block(mine=False)(x), 1e-4)


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
def test_inductor_on_cuda_tensors():
    x = torch.randn(64, 33, 48, device="cuda")
    torch._dynamo.reset()
    mine, theirs = Block().cuda(), Block(mine=False).cuda()
    got = torch.compile(mine)(x)
    torch.cuda.synchronize()
    check_against_torch(got, theirs(x), 1e-4)


def cases(device):
    g = torch.Generator().manual_seed(1)

    def r(*s, lo=-2.0, hi=2.0):
        return (torch.rand(*s, generator=g) * (hi - lo) + lo).to(device)
    x = r(2, 3, 8, 7)
    e = torch.ops.enigma
    return [
        (e.relu.default, (x,)), (e.gelu.default, (x, "tanh")), (e.exp.default, (x,)),
        (e.log.default, (r(4, 5, lo=0.1),)), (e.scale.default, (x, 1.5)),
        (e.div.default, (x, r(8, 1, lo=0.5))), (e.mul.default, (x, r(7))),
        (e.sum.default, (x, [1, 2], True)), (e.mean.default, (x, None, False)), (e.amax.default, (x, [-1], False)),
        (e.argmin.default, (x, 2, False)), (e.cumprod.default, (r(3, 6, lo=0.5, hi=1.5), 1)),
        (e.log_softmax.default, (x, 1)), (e.rms_norm.default, (x, [8, 7], r(8, 7), 1e-5)),
        (e.layer_norm.default, (x, [7], None, None, 1e-5)), (e.bmm.default, (r(3, 5, 9), r(3, 9, 4))),
        (e.matmul.default, (r(9), r(9, 4))), (e.matmul.default, (r(2, 5, 16).half(), r(16, 8).half())),
        (e.bmm.default, (r(3, 5, 16).bfloat16(), r(3, 16, 8).bfloat16())),
        (e.cross_entropy.default, (r(6, 5), torch.tensor([0, 4, 2, 1, 3, 0], device=device), -100, "none")),
        (e.max_pool2d.default, (x, [2, 2], [], [1, 1])), (e.avg_pool2d.default, (x, [3, 2], [2, 1], [0, 0], True)),
        (e.conv2d.default, (x, r(4, 3, 3, 3), r(4), [1, 1], [1, 1], [1, 1], 1)),
    ]


@pytest.mark.parametrize("index", range(len(cases("cpu"))))
@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if CUDA else []))
def test_opcheck_fake_implementations_match_the_real_ones(device, index):
    op, args = cases(device)[index]
    torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if CUDA else []))
def test_operators_agree_with_torch(device):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, 9, 8, generator=g).to(device)
    w = torch.randn(5, 3, 3, 3, generator=g).to(device)
    e = torch.ops.enigma
    pairs = [
        (e.log_softmax(x, 1), torch.log_softmax(x, 1)),
        (e.cumsum(x, -1), torch.cumsum(x, -1)),
        (e.sigmoid(x), torch.sigmoid(x)),
        (e.max_pool2d(x, [3, 3], [2, 2], [1, 1]), F.max_pool2d(x, 3, 2, 1)),
        (e.avg_pool2d(x, [2, 2], [], [0, 0]), F.avg_pool2d(x, 2)),
        (e.conv2d(x, w, None, [1, 2], [1, 0], [1, 1], 1), F.conv2d(x, w, None, (1, 2), (1, 0))),
        (e.rms_norm(x, [9, 8], None, 1e-5), F.rms_norm(x, (9, 8), None, 1e-5)),
    ]
    for got, want in pairs:
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
