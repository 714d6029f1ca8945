import json, random, subprocess, sys
tokens = ["-d","-i","-l","-v","-x","-h","-j","-dv","-lv","-vl","-ldrxe0","-drxe0","-vd","-iv","--ib-dev","--ib-dev=rxe0","--ib-dev=","--ib-port","--ib-port=1","--ib","--i","--l","--list","--list=1","--verbose","--v","--ver=","--verbose=x","--","-","foo","rxe0","1","0","-i0","-i7","--=x","--json","--json=1","--js","--help","--he","--h","--j","-:","-;","-W","-Wfoo","--ib-devx","-dd","","-json","--ib-p","--ib-d=x","-x-l","--LIST"]
random.seed(44)
cases = [[]] + [[t] for t in tokens]
for _ in range(500):
    n = random.randint(1, 5)
    cases.append([random.choice(tokens) for _ in range(n)])
def run(spec):
    inp = "".join("".join(a + "\x1f" for a in c) + "\x1e" for c in cases)
    out = subprocess.run(["./ref", spec], input=inp.encode(), capture_output=True).stdout.decode()
    res, cur, pend = [], [], None
    for line in out.split("\n"):
        if line == "END":
            res.append(cur); cur = []; continue
        if line.startswith("EV "):
            _, c, rest = line.split(" ", 2)
            hexarg, has = rest.rsplit(" ", 1) if " " in rest else ("", rest)
            c = int(c)
            if c == ord('?'):
                cur.append({"err": pend}); pend = None
            else:
                ev = {"opt": chr(c)}
                if has == "1": ev["arg"] = bytes.fromhex(hexarg).decode()
                cur.append(ev)
        elif line:
            assert pend is None, line
            pend = line
    assert len(res) == len(cases)
    return res
out = {"generator": "testdata/getopt_ref/ref.c (glibc 2.36 getopt_long), see getopt_test.go", "devinfo": [], "ibinfo": []}
for spec in ("devinfo", "ibinfo"):
    for c, ev in zip(cases, run(spec)):
        out[spec].append({"args": c, "events": ev})
json.dump(out, open(sys.argv[1], "w"), indent=None, separators=(",", ":"))
