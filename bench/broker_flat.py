"""Does `pin up`'s embedded broker stay flat? Its CPU, sampled while a producer writes at a steady rate and one
consumer per group fetches what arrives (with `pin up`'s fetch wait, or another), for as long as asked; or, with
``--attach PID``, the broker of a running `pin up` (its demo's load), sampled without adding any.

    .venv/bin/python -m bench.broker_flat --minutes 10 --rate 190 --fetch-wait-ms 50 [--retention-ms 60000]
    .venv/bin/python -m bench.broker_flat --attach $(pgrep -f 'pin up') --minutes 60 --sample-seconds 60

Prints one line per sample: minutes since the start, the broker's CPU (cores, over the last interval), its
resident memory, the messages produced so far, and the machine's 1-minute load average (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from bench.kafka import relay_like_producer, settings_for
from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging.kafka import consumer_config, ensure_topics
from pin.messaging.topics import CONSUMER_GROUPS

TOPIC = "pin.calendar.appointment-created.v1"
VALUE = b"x" * 600  # about the size of an envelope of the demo's events


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _broker_of(pid: int) -> int:
    """The pid of the embedded broker `pin up` ``pid`` started (its descendant running the Tansu binary)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if "tansu" not in (entry / "cmdline").read_bytes().decode(errors="replace"):
                continue
            parent = int(entry.name)
            while parent > 1:
                parent = int((Path("/proc") / str(parent) / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if parent == pid:
                    return int(entry.name)
        except (OSError, ValueError):
            continue
    raise SystemExit(f"flat: no embedded broker under pid {pid}")


def _watch(pid: int, minutes: float, every: float) -> None:
    """Sample a broker someone else drives."""
    started = at_before = time.monotonic()
    cpu_before = _cpu_seconds(pid)
    while time.monotonic() - started < minutes * 60:
        time.sleep(every)
        cpu, now = _cpu_seconds(pid), time.monotonic()
        print(
            f"flat: {(now - started) / 60:6.1f} min  broker {(cpu - cpu_before) / (now - at_before):.3f} cores"
            f"  rss {_rss_mb(pid):6.0f} MB  load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        cpu_before, at_before = cpu, now


def _consume(bootstrap: str, group: str, fetch_wait_ms: int, stop: threading.Event) -> None:
    settings = settings_for(bootstrap).with_values(kafka_consumer_fetch_wait_max_ms=fetch_wait_ms)
    consumer = Consumer(consumer_config(settings, f"flat-{group}"))
    consumer.subscribe([TOPIC])
    committed = time.monotonic()
    while not stop.is_set():
        for message in consumer.consume(500, 0.5):
            if message.error() is None:
                consumer.store_offsets(message)
        if time.monotonic() - committed > 1.0:  # as the consumers do: once per batch, not per message
            consumer.commit(asynchronous=True)
            committed = time.monotonic()
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=190.0)
    parser.add_argument("--fetch-wait-ms", type=int, default=50)
    parser.add_argument("--retention-ms", type=int, default=0, help="the topic's retention.ms (0: the broker's)")
    parser.add_argument("--groups", type=int, default=len(CONSUMER_GROUPS), help="consumers (one per group)")
    parser.add_argument("--sample-seconds", type=float, default=30.0)
    parser.add_argument("--attach", type=int, default=0, help="sample the broker of this running `pin up`")
    args = parser.parse_args()
    if args.attach:
        _watch(_broker_of(args.attach), args.minutes, args.sample_seconds)
        return
    broker = EmbeddedKafka(Path(tempfile.mkdtemp(prefix="pin-flat-")) / "broker.log")
    broker.start()
    assert broker.process is not None
    bootstrap = broker.bootstrap_servers
    if args.retention_ms:  # Tansu has no AlterConfigs: the topic is created with its retention
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic(TOPIC, 3, 1, config={"retention.ms": str(args.retention_ms)})
        for future in admin.create_topics([topic]).values():
            future.result(10)
    else:
        ensure_topics(settings_for(bootstrap), [TOPIC])
    stop = threading.Event()
    threads = [
        threading.Thread(target=_consume, args=(bootstrap, group, args.fetch_wait_ms, stop), daemon=True)
        for group in CONSUMER_GROUPS[: args.groups]
    ]
    for thread in threads:
        thread.start()
    producer = relay_like_producer(bootstrap)
    pid = broker.process.pid
    started = time.monotonic()
    produced = 0
    next_sample = started + args.sample_seconds
    cpu_before, at_before = _cpu_seconds(pid), started
    print(f"flat: rate {args.rate}/s, fetch wait {args.fetch_wait_ms} ms, retention {args.retention_ms or 'default'}")
    try:
        while time.monotonic() - started < args.minutes * 60:
            due = int((time.monotonic() - started) * args.rate)
            while produced < due:
                producer.produce(TOPIC, key=str(produced % 997).encode(), value=VALUE)
                produced += 1
            producer.poll(0)
            now = time.monotonic()
            if now >= next_sample:
                cpu = _cpu_seconds(pid)
                print(
                    f"flat: {(now - started) / 60:6.1f} min  broker {(cpu - cpu_before) / (now - at_before):.2f} cores"
                    f"  rss {_rss_mb(pid):6.0f} MB  produced {produced}  load {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
                cpu_before, at_before = cpu, now
                next_sample += args.sample_seconds
            time.sleep(0.01)
    finally:
        producer.flush(10)
        stop.set()
        for thread in threads:
            thread.join(5)
        broker.stop()


if __name__ == "__main__":
    main()
