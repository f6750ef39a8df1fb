"""A short DDP run: a tiny model trained a few epochs with a DistributedSampler; the loss must
go down, parameters must be identical on every rank, and a checkpoint written by rank 0 must
resume on every rank (rank 0 saves, all ranks wait, all load with map_location). The resumed
model's next epoch must match the same epoch of the model that never stopped: a short momentum
run may well see its loss rise for an epoch, so "not much higher than before" is no test."""

import os

from .verdict import Verdict

# gloo on a CPU repeats the same sums; NCCL may add in another order between the two runs
RESUME_TOLERANCE = 1e-3


def run(session, epochs=3):
    """The DDP run's verdict: train, compare the ranks, checkpoint, resume (module docstring)."""
    import torch

    training = _Training(session)
    ddp, optimizer = training.make()
    losses = []
    for epoch in range(epochs):
        session.doing(f"DDP training, epoch {epoch + 1} of {epochs}")
        losses.append(training.epoch(ddp, optimizer, epoch))
    session.doing("comparing parameters across ranks")
    spread = _parameter_spread(session, ddp)
    path = _save_checkpoint(session, ddp, optimizer, epochs - 1)
    session.doing(f"resuming from {path}")
    resumed, resumed_optimizer, last_epoch = training.resume(path)
    same = all(torch.equal(a, b) for a, b in zip(ddp.parameters(), resumed.parameters()))
    session.doing("DDP training after the resume")
    losses.append(training.epoch(resumed, resumed_optimizer, last_epoch + 1))
    restored = int(session.agree(0 if same else 1, "sum")) == 0
    session.doing("the same epoch without the resume")
    continued = training.epoch(ddp, optimizer, epochs)
    return _verdict(session, epochs, losses, spread, restored, continued, path)


class _Training:
    """The data, the model and its optimizer, made the same way for the first run and the
    resumed one, and one epoch of training on this rank's share of the data."""

    def __init__(self, session):
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        from torch.utils.data.distributed import DistributedSampler

        self.session = session
        session.doing("building the DDP model and data")
        generator = torch.Generator().manual_seed(1)
        inputs = torch.randn(512, 16, generator=generator)
        targets = inputs @ torch.randn(16, 1, generator=generator) + 0.01 * torch.randn(512, 1, generator=generator)
        dataset = TensorDataset(inputs, targets)
        self.sampler = DistributedSampler(dataset, num_replicas=session.world, rank=session.rank, shuffle=True, seed=0)
        self.loader = DataLoader(dataset, batch_size=16, sampler=self.sampler)

    def make(self):
        import torch
        from torch.nn.parallel import DistributedDataParallel

        session = self.session
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
        model = model.to(session.device)
        ids = [torch.device(session.device).index] if session.backend == "nccl" else None
        ddp = DistributedDataParallel(model, device_ids=ids)
        return ddp, torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)

    def epoch(self, ddp, optimizer, epoch):
        """The mean loss of one epoch over every rank."""
        import torch

        session = self.session
        self.sampler.set_epoch(epoch)
        total, batches = 0.0, 0
        for x, y in self.loader:
            x, y = x.to(session.device), y.to(session.device)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
        return session.agree(total / batches, "sum") / session.world

    def resume(self, path):
        """A new model and optimizer loaded from the checkpoint, and the epoch it was taken after."""
        import torch

        ddp, optimizer = self.make()
        state = torch.load(path, map_location=self.session.device, weights_only=True)
        ddp.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        return ddp, optimizer, state["epoch"]


def _save_checkpoint(session, ddp, optimizer, epoch):
    """Rank 0 writes the checkpoint (atomically); every rank waits for it. Its path."""
    import torch
    import torch.distributed as dist

    session.doing("writing the checkpoint on rank 0")
    path = session.out / "ddp-checkpoint.pt"
    if session.rank == 0:
        temporary = path.with_name(path.name + ".tmp")
        torch.save({"epoch": epoch, "model": ddp.module.state_dict(), "optimizer": optimizer.state_dict()}, temporary)
        os.replace(temporary, path)
    session.doing("waiting for rank 0's checkpoint")
    session.wait(dist.barrier(async_op=True))
    return path


def _verdict(session, epochs, losses, spread, restored, continued, path):
    """Passed when the loss went down, the ranks agree, and the resumed run matches the one
    that never stopped. ``losses``: each epoch's, then the resumed run's next one."""
    problems = []
    if not losses[-2] < losses[0]:
        problems.append(f"loss did not go down ({losses[0]:.4f} -> {losses[-2]:.4f})")
    if spread != 0:
        problems.append(f"parameters differ across ranks by up to {spread:g}")
    if not restored:
        problems.append("a rank's parameters differ from the checkpoint it loaded")
    if abs(losses[-1] - continued) > RESUME_TOLERANCE * max(1.0, abs(continued)):
        problems.append(
            f"the resumed run's next epoch has loss {losses[-1]:.6f}, the run that never "
            f"stopped {continued:.6f}: the checkpoint did not carry the whole state"
        )
    why = "; ".join(problems) or (
        f"loss {losses[0]:.4f} -> {losses[-2]:.4f} over {epochs} epochs "
        f"on {session.world} ranks, identical parameters, resumed to "
        f"{losses[-1]:.4f} as without the resume"
    )
    return Verdict.judged(
        not problems, why, losses=losses, parameter_spread=spread, continued=continued, checkpoint=str(path)
    )


def _parameter_spread(session, ddp):
    """The largest difference between any rank's parameters and rank 0's."""
    import torch
    import torch.distributed as dist

    flat = torch.cat([p.detach().reshape(-1) for p in ddp.parameters()])
    reference = flat.clone()
    session.wait(dist.broadcast(reference, src=0, async_op=True))
    return session.agree((flat - reference).abs().max().item(), "max")
