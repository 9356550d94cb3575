#!/usr/bin/python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Communication-bound trainer: a two-rank torch.distributed DDP job (gloo backend, loopback)
whose rank 1 is a straggler: before each step it burns --slow-ms of extra thread CPU time, so
rank 0 spends ~47% of its time blocked in DDP's gradient allreduce inside loss.backward().

--world N runs N ranks; --data-ms gives each rank a DataLoader worker of its own (samples of
that much worker CPU) and --slow-data-ms makes rank 1's samples dearer: a straggler by its data
loading (use --slow-ms 0). Each rank k > 0 writes its record beside rank 0's (--truth.rankK),
with a 'data' segment around next(loader).

--no-rank-env starts the ranks with no RANK, LOCAL_RANK, WORLD_SIZE or MASTER_* in their
environment (each told its rank and the rendezvous address on its command line, as mp.spawn and
hand-written launchers do): pipeprof must know them as ranks by their connections to each other.
--launcher-imports-torch makes the launcher map libtorch, as torchrun's agent does: the daemon
must still take each rank, not the launcher, for a job.

Process layout: this script is a launcher (no torch) that starts both ranks as its children
(siblings: `python3 ddp_gloo.py --rank N`, with RANK, LOCAL_RANK and WORLD_SIZE in their
environment as torchrun sets them), relays rank 0's stdout (so READY names rank 0's pid and
trainer thread), forwards SIGTERM/SIGINT to both ranks, and exits 0 only once rank 0 exited 0
after writing the --truth file (rank 1 writes none). If one rank ends, the other gets GRACE_S to
end too (the same collective stop, or gloo's error once the peer's sockets close), then SIGKILL;
a rank whose launcher dies gets SIGTERM (PR_SET_PDEATHSIG).

Both ranks stop at the same step: a signal or rank 0's --duration deadline only requests a stop,
and a 1-element allreduce (MAX) at the end of every step decides it for both, so neither is left
blocked in a collective its peer never joins.

Each rank: torch.set_num_threads(1), pinned to CPU <rank> (with 2+ CPUs; --no-pin), an MLP
256-512-512-10 (0.4 M parameters) on a fixed batch, SGD. Rank 0's ground truth: forward + loss
and the optimizer step in 'compute' segments; loss.backward() (where DDP's allreduce runs and
rank 0 waits for rank 1's gradients) and the stop-flag allreduce in 'comm' segments (CPU ->
RUNNING, rest -> COMM_WAIT). Measured for rank 0 on the idle 2-vCPU VM: COMM_WAIT 46-48%,
RUNNING 50-52%, RUNQ ~2% (rank 0's gloo threads share its CPU); with --slow-ms 0 the ranks are
even and COMM_WAIT is still ~20% (the allreduce itself). Expected verdict: COMMUNICATION BOUND,
the straggler being rank 1 (on-CPU). Extra info: peer_pid (rank 1's pid).
"""
import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groundtruth  # noqa: E402

GRACE_S = 10.0  # after one rank ends, how long the other may take before it is killed
PR_SET_PDEATHSIG = 1


class CollectiveStopRecorder(groundtruth.Recorder):
    """A Recorder whose loop ends only where both ranks agreed: signals and the deadline just
    request a stop (any number of signals: one rank may get both the group's and the forwarded
    one), and step() sets .stop from the per-step flag allreduce."""

    stop_requested = False

    def _on_signal(self, signum, frame):
        self.stop_requested = True
        self.stop_reason = self.stop_reason or signal.Signals(signum).name

    def wants_stop(self, own_deadline):
        if self.stop_requested:
            return True
        if own_deadline and self._deadline is not None and time.monotonic_ns() >= self._deadline:
            self.stop_reason = self.stop_reason or "duration"
            return True
        return False

    def running(self):
        return not self.stop


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank, world):
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world)}


def launcher(args, argv):
    """Starts rank 1 then rank 0, relays rank 0's stdout; returns the exit status."""
    started_ns = time.time_ns()
    if args.launcher_imports_torch:
        import torch  # noqa: F401 -- as torchrun's agent does: the launcher maps libtorch too
    port = free_port()
    base = [sys.executable, os.path.abspath(__file__)] + argv + ["--launcher-pid", str(os.getpid())]
    if args.rank_env:
        # RANK, LOCAL_RANK and WORLD_SIZE as torchrun sets them: what pipeprof knows a rank by.
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   GLOO_SOCKET_IFNAME="lo")
        envs = [dict(env, **rank_env(k, args.world)) for k in range(args.world)]
    else:
        env = {k: v for k, v in os.environ.items()
               if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
        env["GLOO_SOCKET_IFNAME"] = "lo"
        envs = [env] * args.world
        base += ["--master-port", str(port)]
    others = [subprocess.Popen(base + ["--rank", str(k), "--quiet"], env=envs[k],
                               stdout=subprocess.DEVNULL)
              for k in range(1, args.world)]
    r1 = others[0]
    r0 = subprocess.Popen(base + ["--rank", "0", "--peer-pid", str(r1.pid), "--rank-pids",
                                  ",".join(str(r.pid) for r in others)],
                          env=envs[0], stdout=subprocess.PIPE, text=True)
    ranks = [r0] + others

    def relay():
        for line in r0.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()

    relay_thread = threading.Thread(target=relay, daemon=True)
    relay_thread.start()

    def forward(signum, frame):
        for r in ranks:
            if r.poll() is None:
                r.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    kill_at = None
    while any(r.poll() is None for r in ranks):
        if kill_at is None and any(r.returncode is not None for r in ranks):
            kill_at = time.monotonic() + GRACE_S
        elif kill_at is not None and time.monotonic() >= kill_at:
            for r in ranks:
                if r.poll() is None:
                    r.kill()
        time.sleep(0.05)
    relay_thread.join(5.0)
    written = not args.truth or (os.path.exists(args.truth) and
                                 os.stat(args.truth).st_mtime_ns >= started_ns)
    if r0.returncode == 0 and written:
        return 0
    sys.stderr.write("ddp_gloo: ranks exited %s, truth file %s\n" % (
        [r.returncode for r in ranks], "written" if written else "missing"))
    return r0.returncode if r0.returncode and r0.returncode > 0 else 1


def rank_main(args):
    # die with the launcher (SIGTERM: a collective stop, the truth file still gets written)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != args.launcher_pid:
        return 1
    if args.pin:  # before torch starts its threads (gloo's), so they inherit it
        os.sched_setaffinity(0, {args.rank % os.cpu_count()})
    # Each rank its own record: rank 0 at --truth, rank k beside it (--truth.rankK).
    truth = args.truth if args.rank == 0 or not args.truth else "%s.rank%d" % (args.truth,
                                                                               args.rank)
    rec = CollectiveStopRecorder("ddp_gloo", truth)
    st = {}

    def burn(ms):
        c0 = time.thread_time_ns()
        while time.thread_time_ns() - c0 < ms * 1e6:
            st["work"] = st["torch"].tanh(st["work"] @ st["w"])

    def step():
        if args.rank == 1:
            burn(args.slow_ms)  # the straggler's extra on-CPU work
        x, y = st["x"], st["y"]
        if "it" in st:
            with rec.seg("data"):
                x, y = next(st["it"])
        with rec.seg("compute"):
            loss = st["loss_fn"](st["ddp"](x), y)
        with rec.seg("comm"):
            loss.backward()  # DDP allreduces the gradients in here
        with rec.seg("compute"):
            st["opt"].step()
            st["opt"].zero_grad(set_to_none=True)
        with rec.seg("comm"):
            flag = st["flag"].fill_(1 if rec.wants_stop(args.rank == 0) else 0)
            st["dist"].all_reduce(flag, op=st["dist"].ReduceOp.MAX)
        if flag.item():
            rec.stop = True
            rec.stop_reason = rec.stop_reason or "peer"

    def warmup():
        import datetime
        import torch
        import torch.distributed as dist
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        init = "tcp://127.0.0.1:%d" % args.master_port if args.master_port else None
        dist.init_process_group("gloo", init_method=init, rank=args.rank,
                                world_size=args.world, timeout=datetime.timedelta(seconds=60))
        torch.manual_seed(0)  # same initial weights on both ranks, as DDP expects
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10))
        g = torch.Generator().manual_seed(1 + args.rank)  # each rank its own data shard
        st.update(torch=torch, dist=dist, ddp=torch.nn.parallel.DistributedDataParallel(model),
                  x=torch.randn(args.batch, 256, generator=g),
                  y=torch.randint(0, 10, (args.batch,), generator=g),
                  loss_fn=torch.nn.CrossEntropyLoss(),
                  work=torch.randn(64, 256, generator=g), w=torch.randn(256, 256, generator=g) / 16)
        st["opt"] = torch.optim.SGD(model.parameters(), lr=1e-3)
        # One flag tensor for the whole run: a fresh one per step may be freed last by gloo's
        # worker thread, which then needs the GIL, while torch 1.13's ~ProcessGroupGloo joins
        # that thread holding the GIL at teardown: a deadlock seen in about half the exits.
        st["flag"] = torch.zeros(1, dtype=torch.int64)
        if args.data_ms:
            # A DataLoader worker of its own; rank 1's samples cost --slow-data-ms instead.
            from data_bound import busy_dataset
            item_ms = args.slow_data_ms if args.rank == 1 else args.data_ms
            loader = torch.utils.data.DataLoader(busy_dataset(torch, item_ms),
                                                 batch_size=args.batch, num_workers=1)
            st["it"] = iter(loader)
            st["worker_pids"] = [w.pid for w in st["it"]._workers]
        for _ in range(5):
            step()
            if rec.stop:
                break
        return {"rank": args.rank, "world_size": args.world, "backend": "gloo",
                "peer_pid": args.peer_pid, "rank_pids": args.rank_pids,
                "worker_pids": st.get("worker_pids", []), "data_ms": args.data_ms,
                "slow_data_ms_rank1": args.slow_data_ms,
                "slow_ms_rank1": args.slow_ms, "batch": args.batch, "pinned": args.pin,
                "rank_env": args.rank_env,
                "parameters": sum(p.numel() for p in model.parameters())}

    def cleanup():
        it = st.pop("it", None)
        if it is not None:
            it._shutdown_workers()
        if "dist" in st and st["dist"].is_initialized():
            st["dist"].destroy_process_group()

    return groundtruth.run(rec, args, warmup, step, cleanup)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    groundtruth.add_common_args(p)
    p.add_argument("--slow-ms", type=float, default=9.0,
                   help="rank 1's extra thread CPU ms per step (default %(default)s)")
    p.add_argument("--batch", type=int, default=32,
                   help="batch size per rank (default %(default)s)")
    p.add_argument("--pin", action=argparse.BooleanOptionalAction, default=os.cpu_count() >= 2,
                   help="pin rank N to CPU N (default: on with >= 2 CPUs)")
    p.add_argument("--world", type=int, default=2, help="ranks (default %(default)s)")
    p.add_argument("--data-ms", type=float, default=0,
                   help="give each rank a DataLoader worker whose samples cost this much worker "
                   "CPU (default: none, a fixed batch)")
    p.add_argument("--slow-data-ms", type=float, default=0,
                   help="with --data-ms: rank 1's worker's CPU ms per sample instead, a "
                   "straggler by its data loading")
    p.add_argument("--rank-env", action=argparse.BooleanOptionalAction, default=True,
                   help="give each rank RANK, LOCAL_RANK, WORLD_SIZE and MASTER_* in its "
                   "environment, as torchrun does (default: on; off, as mp.spawn)")
    p.add_argument("--launcher-imports-torch", action="store_true",
                   help="the launcher imports torch before it starts the ranks, as torchrun's "
                   "agent does")
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--master-port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--rank-pids", default="", help=argparse.SUPPRESS)
    p.add_argument("--peer-pid", type=int, help=argparse.SUPPRESS)
    p.add_argument("--launcher-pid", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.world < 2:
        p.error("--world must be at least 2")
    return launcher(args, argv) if args.rank is None else rank_main(args)


if __name__ == "__main__":
    sys.exit(main())
