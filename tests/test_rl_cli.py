"""``autoshard train-policy`` and ``autoshard plan --algo rl`` through the CLI, and their one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autoshard.cli.main import main
from autoshard.plan import Plan, validate
from autoshard.planners.rl.policy import TrainedPolicy
from autoshard.tables import Table
from autoshard.tasks import Task, load_tasks, save_tasks


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)  # the command sets one thread for itself


def _tasks(n: int, t: int, d: int, seed: int) -> list[Task]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        tables = tuple(Table(f"s{seed}k{k}t{i}", int(rng.choice([8, 16, 64])), int(10 ** rng.uniform(3, 5)),
                             float(rng.lognormal(2.0, 1.0))) for i in range(t))
        out.append(Task(tables=tables, device_memory=(10**9,) * d, name=f"s{seed}-{k}"))
    return out


@pytest.fixture
def files(tmp_path):
    train, test = str(tmp_path / "train.json"), str(tmp_path / "test.json")
    save_tasks(train, _tasks(3, 8, 2, 0))
    save_tasks(test, _tasks(2, 12, 3, 1))
    return train, test, str(tmp_path / "policy.pt")


def test_train_policy_then_plan_with_it(files, tmp_path, capsys):
    train, test, policy = files
    assert main(["train-policy", "--cost-model", "analytical", "--tasks", train, "--eval-tasks", test,
                 "--iterations", "4", "--eval-every", "2", "--samples", "4", "-o", policy]) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and "best heuristic" in out
    ck = TrainedPolicy.load(policy)
    assert ck.cost_model == {"name": "analytical", "spec": "analytical"} and ck.state["iteration"] == 4
    # resuming a finished run to more iterations continues from where it stopped
    assert main(["train-policy", "--cost-model", "analytical", "--tasks", train, "--iterations", "6",
                 "--eval-every", "2", "--samples", "4", "-o", policy, "--resume"]) == 0
    assert TrainedPolicy.load(policy).state["iteration"] == 6

    plan_path = str(tmp_path / "plan.json")
    assert main(["plan", "--task", test, "--task-index", "1", "--algo", "rl", "--policy", policy,
                 "-o", plan_path]) == 0
    assert "plan by rl" in capsys.readouterr().out
    plan = Plan.load(plan_path)
    validate(plan, load_tasks(test)[1])
    assert plan.algorithm == "rl"


def _garbage(tmp_path):
    p = tmp_path / "garbage.pt"
    p.write_bytes(b"\x00\x01 nope")
    return str(p)


@pytest.mark.parametrize("argv, message", [
    (lambda f, tmp: ["train-policy", "--cost-model", "analytical", "--tasks", str(tmp / "none.json"),
                     "-o", f[2]], "no such file"),
    (lambda f, tmp: ["train-policy", "--cost-model", "analytical", "--tasks", f[0], "--samples", "1",
                     "-o", f[2]], "at least 2"),
    (lambda f, tmp: ["train-policy", "--cost-model", str(tmp / "none.pt"), "--tasks", f[0], "-o", f[2]],
     "no such cost model"),
    (lambda f, tmp: ["train-policy", "--cost-model", "analytical", "--tasks", f[0], "-o", f[2], "--resume"],
     "does not exist"),
    (lambda f, tmp: ["train-policy", "--cost-model", "analytical", "--tasks", f[0], "-o", f[2],
                     "--lr", "nan"], "learning_rate"),
    (lambda f, tmp: ["train-policy", "--cost-model", "analytical", "--tasks", f[0], "-o", f[2],
                     "--refresh-with-real", str(tmp / "nodata")], "no such directory"),
    (lambda f, tmp: ["plan", "--task", f[1], "--algo", "rl", "--policy", str(tmp / "none.pt")],
     "no such policy"),
    (lambda f, tmp: ["plan", "--task", f[1], "--algo", "rl", "--policy", _garbage(tmp)],
     "not a readable policy"),
])
def test_bad_input_is_one_line_and_exit_2(files, tmp_path, capsys, argv, message):
    assert main(argv(files, tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and err.startswith("autoshard: error:")
