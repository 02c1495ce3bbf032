"""python-json: a real program, run as-is: CPython building a document, then dumping it to JSON
and parsing it back, a few rounds, each round working on the copy the previous one parsed.

Usage: python3 json_roundtrip.py [--size N] [--seed S]    (N: records in the document)

Verifies that every round trip gives back an equal document and prints one JSON line:
{"workload":"python-json","ok":true,"ops":...,"bytes":...,"checksum":"<sha256 prefix>","elapsed_ns":...}
and exits 2 with "verification failed: ..." on stderr when a round trip differs.
"""
import hashlib
import json
import random
import sys
import time

ROUNDS = 4
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett",
         "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]


def record(rnd, i):
    return {
        "id": i,
        "name": "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(rnd.randint(5, 40))),
        "tags": [rnd.choice(WORDS) for _ in range(rnd.randint(0, 8))],
        "score": rnd.random() * 1000,
        "active": rnd.random() < 0.5,
        "pose": {"x": rnd.uniform(-50, 50), "y": rnd.uniform(-50, 50), "theta": rnd.uniform(-3.14, 3.14)},
        "samples": [rnd.randint(-100000, 100000) for _ in range(rnd.randint(0, 24))],
        "note": None if rnd.random() < 0.7 else "x" * rnd.randint(100, 4000),
    }


def main(argv):
    size, seed = 20000, 42
    args = iter(argv[1:])
    for a in args:
        key, _, val = a.partition("=")
        val = val or next(args, "")
        if key == "--size":
            size = int(val)
        elif key == "--seed":
            seed = int(val)
        elif key == "--threads":
            pass
        else:
            print(f"usage: {argv[0]} [--size N] [--seed S]  (bad argument: {a})", file=sys.stderr)
            return 64
    t0 = time.monotonic_ns()
    rnd = random.Random(seed)
    doc = {"version": 1, "records": [record(rnd, i) for i in range(size)]}
    total = 0
    text = ""
    for r in range(ROUNDS):
        text = json.dumps(doc, sort_keys=(r % 2 == 1))
        back = json.loads(text)
        if back != doc:
            print(f"verification failed: python-json: round {r} changed the document", file=sys.stderr)
            return 2
        total += len(text)
        doc = back
    if len(doc["records"]) != size or doc["records"][-1]["id"] != size - 1:
        print("verification failed: python-json: records lost", file=sys.stderr)
        return 2
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    t1 = time.monotonic_ns()
    print(json.dumps({"workload": "python-json", "ok": True, "ops": size * ROUNDS, "bytes": total,
                      "checksum": digest, "elapsed_ns": t1 - t0}, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
