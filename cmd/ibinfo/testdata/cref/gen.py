#!/usr/bin/env python3
"""Records rdma-core v44.0 ibv_devinfo's output on fixture device data.

Builds libibverbs/examples/devinfo.c from an rdma-core checkout (tag v44.0)
against mockverbs.c, a stand-in libibverbs that serves the data of a fixture
file, writes the fixtures (hand-made ones and seeded random ones) to
fixtures/, runs the reference on each with a set of command lines, and
writes cases.json.gz: fixture, args, stdout, exit status. cref_test.go replays
the cases through ibinfo's run().

Needs gcc and libibverbs-dev 44 (Debian 12) for <infiniband/verbs.h>:
    RDMA_CORE=/path/to/rdma-core python3 gen.py
"""
import gzip, json, os, random, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RDMA_CORE = os.environ.get("RDMA_CORE", "/work/.mirror/linux-rdma+rdma-core/repo")


def build(tmp):
    src = subprocess.run(["git", "-C", RDMA_CORE, "show", "v44.0:libibverbs/examples/devinfo.c"],
                         check=True, capture_output=True).stdout
    os.makedirs(os.path.join(tmp, "infiniband"))
    open(os.path.join(tmp, "devinfo.c"), "wb").write(src)
    open(os.path.join(tmp, "config.h"), "w").write("")
    open(os.path.join(tmp, "infiniband", "driver.h"), "w").write(
        "#include <infiniband/verbs.h>\n"
        "enum ibv_gid_type_sysfs { IBV_GID_TYPE_SYSFS_IB_ROCE_V1, IBV_GID_TYPE_SYSFS_ROCE_V2 };\n"
        "int ibv_query_gid_type(struct ibv_context *, uint8_t, unsigned int, enum ibv_gid_type_sysfs *);\n"
        "int ibv_read_sysfs_file(const char *, const char *, char *, size_t);\n")
    exe = os.path.join(tmp, "devinfo_ref")
    subprocess.run(["gcc", "-O1", "-w", "-I", tmp, "-o", exe, os.path.join(tmp, "devinfo.c"),
                    os.path.join(HERE, "mockverbs.c")], check=True)
    return exe


U8, U16, U32, U64 = 0xff, 0xffff, 0xffffffff, 0xffffffffffffffff


def edge(r, mask):
    c = r.random()
    if c < 0.25:
        return 0
    if c < 0.35:
        return mask
    if c < 0.45 and mask >= U32:
        return r.choice([0x7fffffff, 0x80000000, 0x80000001]) & mask
    if c < 0.6:
        return r.randint(1, 16)
    return r.randint(0, mask)


DEV_FIELDS = [("max_mr_size", U64), ("page_size_cap", U64), ("vendor_id", U32), ("vendor_part_id", U32),
              ("hw_ver", U32), ("max_qp", U32), ("max_qp_wr", U32), ("device_cap_flags", U32),
              ("max_sge", U32), ("max_sge_rd", U32), ("max_cq", U32), ("max_cqe", U32), ("max_mr", U32),
              ("max_pd", U32), ("max_qp_rd_atom", U32), ("max_ee_rd_atom", U32), ("max_res_rd_atom", U32),
              ("max_qp_init_rd_atom", U32), ("max_ee_init_rd_atom", U32), ("atomic_cap", U8), ("max_ee", U32),
              ("max_rdd", U32), ("max_mw", U32), ("max_raw_ipv6_qp", U32), ("max_raw_ethy_qp", U32),
              ("max_mcast_grp", U32), ("max_mcast_qp_attach", U32), ("max_total_mcast_qp_attach", U32),
              ("max_ah", U32), ("max_fmr", U32), ("max_map_per_fmr", U32), ("max_srq", U32),
              ("max_srq_wr", U32), ("max_srq_sge", U32), ("max_pkeys", U16), ("local_ca_ack_delay", U8),
              ("odp_caps.general_caps", U64), ("odp_caps.per_transport_caps.rc_odp_caps", U32),
              ("odp_caps.per_transport_caps.uc_odp_caps", U32), ("odp_caps.per_transport_caps.ud_odp_caps", U32),
              ("xrc_odp_caps", U32), ("completion_timestamp_mask", U64), ("hca_core_clock", U64),
              ("device_cap_flags_ex", U64), ("tso_caps.max_tso", U32), ("tso_caps.supported_qpts", U32),
              ("rss_caps.supported_qpts", U32), ("rss_caps.max_rwq_indirection_tables", U32),
              ("rss_caps.max_rwq_indirection_table_size", U32), ("rss_caps.rx_hash_fields_mask", U64),
              ("rss_caps.rx_hash_function", U8), ("max_wq_type_rq", U32),
              ("packet_pacing_caps.qp_rate_limit_min", U32), ("packet_pacing_caps.qp_rate_limit_max", U32),
              ("packet_pacing_caps.supported_qpts", U32), ("raw_packet_caps", U32),
              ("tm_caps.max_rndv_hdr_size", U32), ("tm_caps.max_num_tags", U32), ("tm_caps.flags", U32),
              ("tm_caps.max_ops", U32), ("tm_caps.max_sge", U32), ("cq_mod_caps.max_cq_count", U16),
              ("cq_mod_caps.max_cq_period", U16), ("max_dm_size", U64)]
# Port fields with the widths the kernel ABI gives them.
PORT_FIELDS = [("state", U8), ("max_mtu", U8), ("active_mtu", U8), ("port_cap_flags", U32),
               ("max_msg_sz", U32), ("bad_pkey_cntr", U32), ("qkey_viol_cntr", U32), ("pkey_tbl_len", U16),
               ("lid", U16), ("sm_lid", U16), ("lmc", U8), ("max_vl_num", U8), ("sm_sl", U8),
               ("subnet_timeout", U8), ("init_type_reply", U8), ("active_width", U8), ("active_speed", U8),
               ("phys_state", U8), ("link_layer", U8), ("flags", U8), ("port_cap_flags2", U16)]


def rand_gid(r):
    c = r.random()
    if c < 0.3:
        return "00000000000000000000ffff" + "%08x" % r.randint(0, U32)
    if c < 0.5:
        return "fe80000000000000" + "%016x" % r.randint(0, U64)
    if c < 0.6:
        return "%016x" % r.randint(0, U64) + "0000000000000000"  # null interface id
    if c < 0.7:
        return "000000000000000000000000" + "%08x" % r.randint(0, U32)
    return "%032x" % r.randint(0, (1 << 128) - 1)


def rand_device(r, name):
    out = ["device " + name, "node_type %d" % r.choice([1, 1, 1, 2, 3, 4, 5, 6, 7, 0, 9])]
    c = r.random()
    if c < 0.4:
        out.append("board_id " + r.choice(["-", "0a", "4d545f30303030303030303130", "61620063640a",
                                            "41" * 256, "41" * 255 + "0a", "41" * 300 + "0a"]))
    out.append("num_comp_vectors %d" % r.choice([0, 1, 2, 64, 0x7fffffff]))
    out.append("attr fw_ver " + r.choice(["", "0.0.0", "20.31.1014", "x" * 70, "a b  c"]))
    out.append("attr node_guid 0x%x" % edge(r, U64))
    out.append("attr sys_image_guid 0x%x" % edge(r, U64))
    for f, m in DEV_FIELDS:
        if r.random() < 0.8:
            out.append("attr %s 0x%x" % (f, edge(r, m)))
    nports = r.choice([0, 1, 1, 1, 2, 3])
    out.append("attr phys_port_cnt %d" % nports)
    for p in range(1, nports + 1):
        if r.random() < 0.05:
            continue  # a port the device does not answer for: EINVAL
        out.append("port %d" % p)
        for f, m in PORT_FIELDS:
            if f in ("state", "max_mtu", "active_mtu", "phys_state", "link_layer", "max_vl_num",
                     "active_width", "active_speed") and r.random() < 0.7:
                v = r.randint(0, {"active_width": 17, "active_speed": 130}.get(f, 8))
            else:
                v = edge(r, m)
            out.append("pattr %s %d" % (f, v))
        tbl = r.choice([0, 1, 2, 4, 8, 8, 40, 0x80000000])
        out.append("pattr gid_tbl_len %d" % tbl)
        if r.random() < 0.05:
            out.append("port_fail %d" % r.choice([5, 22, 95]))
        for i in range(min(tbl, 40)):
            c = r.random()
            if c < 0.5:
                out.append("gid %d %d %s %d" % (p, i, rand_gid(r), r.choice([0, 1, 2, 2, 3])))
            elif c < 0.53:
                out.append("gid_fail %d %d" % (p, i))
            elif c < 0.58:
                out.append("gidtype_fail %d %d %s" % (p, i, rand_gid(r)))
    for flag in ("open_fail", "query_fail", "close_fail"):
        if r.random() < 0.06:
            out.append(flag)
    return out


RXE = """device {name}
node_type 1
num_comp_vectors 1
attr fw_ver 0.0.0
attr node_guid 0x{guid:016x}
attr sys_image_guid 0x{guid:016x}
attr max_mr_size 0xffffffffffffffff
attr page_size_cap 0xfffff000
attr vendor_id 0xffffff
attr vendor_part_id 0
attr hw_ver 0
attr max_qp 1048560
attr max_qp_wr 1048560
attr device_cap_flags 0x21257476
attr max_sge 32
attr max_sge_rd 32
attr max_cq 1048576
attr max_cqe 32767
attr max_mr 524287
attr max_pd 1048576
attr max_qp_rd_atom 128
attr max_res_rd_atom 258048
attr max_qp_init_rd_atom 128
attr atomic_cap 1
attr max_mcast_grp 8192
attr max_mcast_qp_attach 56
attr max_total_mcast_qp_attach 458752
attr max_ah 32767
attr max_srq 917503
attr max_srq_wr 1048576
attr max_srq_sge 27
attr max_pkeys 64
attr local_ca_ack_delay 15
attr device_cap_flags_ex 0x21257476
attr phys_port_cnt 1
port 1
pattr state 4
pattr max_mtu 5
pattr active_mtu 3
pattr gid_tbl_len 1024
pattr port_cap_flags 0x00890000
pattr max_msg_sz 0x800000
pattr pkey_tbl_len 1
pattr max_vl_num 1
pattr active_width 2
pattr active_speed 32
pattr phys_state 5
pattr link_layer 2
gid 1 0 fe80000000000000{guidx:016x} 2
gid 1 1 00000000000000000000ffff0a6300{last:02x} 2
"""

MLX5 = """device mlx5_0
node_type 1
board_id 4d545f303030303030303031300a
num_comp_vectors 63
attr fw_ver 20.31.1014
attr node_guid 0x98039b03009fcfd6
attr sys_image_guid 0x98039b03009fcfd6
attr max_mr_size 0xffffffffffffffff
attr page_size_cap 0xfffffffffffff000
attr vendor_id 0x02c9
attr vendor_part_id 4123
attr hw_ver 0x0
attr max_qp 262144
attr max_qp_wr 32768
attr device_cap_flags 0xed721c36
attr max_sge 30
attr max_cq 16777216
attr max_cqe 4194303
attr max_mr 16777216
attr max_pd 16777216
attr max_qp_rd_atom 16
attr max_res_rd_atom 4194304
attr max_qp_init_rd_atom 16
attr atomic_cap 1
attr max_mcast_grp 2097152
attr max_mcast_qp_attach 240
attr max_total_mcast_qp_attach 503316480
attr max_ah 2147483647
attr max_srq 8388608
attr max_srq_wr 32767
attr max_srq_sge 31
attr max_pkeys 128
attr local_ca_ack_delay 16
attr odp_caps.general_caps 0x3
attr odp_caps.per_transport_caps.rc_odp_caps 0x3f
attr odp_caps.per_transport_caps.uc_odp_caps 0x0
attr odp_caps.per_transport_caps.ud_odp_caps 0x3
attr xrc_odp_caps 0xff
attr completion_timestamp_mask 0x7fffffffffffffff
attr hca_core_clock 156250
attr raw_packet_caps 0xf
attr device_cap_flags_ex 0x15ed721c36
attr tso_caps.max_tso 262144
attr tso_caps.supported_qpts 0x110
attr rss_caps.supported_qpts 0x100
attr rss_caps.max_rwq_indirection_tables 1048576
attr rss_caps.max_rwq_indirection_table_size 2048
attr rss_caps.rx_hash_function 0x1
attr rss_caps.rx_hash_fields_mask 0x800000ff
attr max_wq_type_rq 8388608
attr packet_pacing_caps.qp_rate_limit_min 1
attr packet_pacing_caps.qp_rate_limit_max 100000000
attr packet_pacing_caps.supported_qpts 0x100
attr tm_caps.max_rndv_hdr_size 64
attr tm_caps.max_num_tags 127
attr tm_caps.flags 1
attr tm_caps.max_ops 32768
attr tm_caps.max_sge 1
attr cq_mod_caps.max_cq_count 65535
attr cq_mod_caps.max_cq_period 4095
attr max_dm_size 131072
attr phys_port_cnt 2
port 1
pattr state 4
pattr max_mtu 5
pattr active_mtu 5
pattr gid_tbl_len 8
pattr port_cap_flags 0x2651e848
pattr port_cap_flags2 0x0032
pattr max_msg_sz 0x40000000
pattr pkey_tbl_len 128
pattr lid 7
pattr sm_lid 1
pattr lmc 0
pattr max_vl_num 4
pattr sm_sl 0
pattr subnet_timeout 18
pattr active_width 2
pattr active_speed 64
pattr phys_state 5
pattr link_layer 1
gid 1 0 fe8000000000000098039b03009fcfd6 0
port 2
pattr state 1
pattr max_mtu 5
pattr active_mtu 1
pattr gid_tbl_len 4
pattr port_cap_flags 0x04010000
pattr max_msg_sz 0x40000000
pattr pkey_tbl_len 1
pattr max_vl_num 4
pattr active_width 1
pattr active_speed 1
pattr phys_state 3
pattr link_layer 2
gid 2 0 fe8000000000000098039bfffe9fcfd7 1
gid 2 1 fe8000000000000098039bfffe9fcfd7 2
gid 2 2 0000000000000000000000000a000001 1
gid 2 3 00000000000000000000ffff0a000001 2
"""


def rxe(name, guid, last):
    return RXE.format(name=name, guid=guid, guidx=guid, last=last)


def main():
    r = random.Random(44)
    fixdir = os.path.join(HERE, "fixtures")
    os.makedirs(fixdir, exist_ok=True)
    for f in os.listdir(fixdir):
        os.remove(os.path.join(fixdir, f))
    fixtures = {
        "rxe2": rxe("rxe0", 0x025056fffe8fc5b3, 1) + rxe("rxe1", 0x025056fffe8fc5b4, 2),
        "mlx5": MLX5,
        "none": "",
        "list_fail": "list_fail\n",
        "iwarp": rxe("siw0", 0x1122334455667788, 3).replace("node_type 1", "node_type 4"),
        "unknown_node": rxe("odd0", 0x1, 4).replace("node_type 1", "node_type 9"),
        "ib_ll_unspec": MLX5.replace("pattr link_layer 1", "pattr link_layer 0"),
        "open_fail": rxe("rxe0", 1, 1) + "open_fail\n" + rxe("rxe1", 2, 2),
        "query_fail": rxe("rxe0", 1, 1) + "query_fail\n" + rxe("rxe1", 2, 2),
        "close_fail": rxe("rxe0", 1, 1) + "close_fail\n" + rxe("rxe1", 2, 2),
        "port_fail": MLX5.replace("pattr link_layer 1\n", "pattr link_layer 1\nport_fail 22\n"),
        "gid_fail": MLX5.replace("gid 2 2 0000000000000000000000000a000001 1", "gid_fail 2 2"),
        "gidtype_fail": MLX5.replace("gid 2 1 fe8000000000000098039bfffe9fcfd7 2",
                                     "gidtype_fail 2 1 fe8000000000000098039bfffe9fcfd7"),
    }
    for i in range(40):
        n = r.choice([1, 1, 2, 3])
        fixtures["random%02d" % i] = "\n".join(sum((rand_device(r, "dev%d" % k) for k in range(n)), [])) + "\n"
    common = [[], ["-v"], ["-l"], ["-i", "2"], ["-v", "-i", "1"]]
    named = [["-d", "rxe0"], ["-d", "rxe1", "-i", "1", "-v"], ["--ib-dev=rxe0", "--verbose"], ["-d", "nosuch"],
             ["-i", "7"], ["-d", "rxe0", "-i", "2"], ["-x"], ["-i", "0"], ["-i", "x"], ["-i", "256", "-v"],
             ["-i", "257"], ["-vi1"], ["-l", "-x"], ["-x", "-l"], ["-i"], ["--ib-port", "0x1", "-v"],
             ["-d", "mlx5_0", "-v"], ["-d", "dev1", "-v"], ["-d", ""], ["--list"], ["foo", "-v"], ["--", "-v"]]
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(tmp)
        for name, text in sorted(fixtures.items()):
            path = os.path.join(fixdir, name + ".fix")
            open(path, "w").write(text)
            argsets = common + (named if not name.startswith("random") else [["-d", "dev1", "-v"]])
            for args in argsets:
                p = subprocess.run(["ibv_devinfo"] + args, executable=exe, capture_output=True,
                                   env={"IBINFO_FIXTURE": path})
                if p.returncode == 99:
                    sys.exit("mockverbs failed on %s: %s" % (name, p.stderr.decode()))
                cases.append({"fixture": name + ".fix", "args": args,
                              "stdout": p.stdout.decode("latin-1"), "exit": p.returncode})
    with gzip.GzipFile(os.path.join(HERE, "cases.json.gz"), "wb", mtime=0) as z:
        z.write(json.dumps(cases, indent=0).encode())
    print(len(cases), "cases")


main()
