"""Medians of several `shale-bench engine --features rocksdb --json` runs: per phase, the
rates, ratios (with RocksDB's settle), CPU per operation, write bytes and size ratios, device
reads per get, RSS. Usage: python3 scripts/bench/engine_medians.py RUN.json..."""
import json,sys,statistics as st
runs=[json.load(open(f)) for f in sys.argv[1:]]
def med(xs): return st.median(xs)
phases=['fill-random','fill-sequential','read-random','scan']
rows=[]
for ph in phases:
    s=[ [p for p in r['phases'] if p['name']==ph][0] for r in runs]
    k=[ [p for p in r['peer']['phases'] if p['name']==ph][0] for r in runs]
    ra=[ [x for x in r['peer']['ratio_vs_rocksdb'] if x['name']==ph][0] for r in runs]
    f=lambda xs: ", ".join(f"{x:,.0f}" if x>100 else f"{x:.3f}" for x in xs)
    print(ph)
    print("  shale ops/s", f([x['ops_per_sec'] for x in s]), "med", f"{med([x['ops_per_sec'] for x in s]):,.0f}")
    print("  rocks ops/s", f([x['ops_per_sec'] for x in k]), "med", f"{med([x['ops_per_sec'] for x in k]):,.0f}", "settle", [x.get('settle_seconds') for x in k])
    print("  ratio", f([x['ops_per_sec'] for x in ra]), "med", f"{med([x['ops_per_sec'] for x in ra]):.3f}")
    if ra[0].get('ops_per_sec_incl_settle') is not None:
        print("  ratio incl settle", f([x['ops_per_sec_incl_settle'] for x in ra]), "med", f"{med([x['ops_per_sec_incl_settle'] for x in ra]):.3f}")
    print("  cpu us/op shale", f([x['cpu_us_per_op'] for x in s]), "med", f"{med([x['cpu_us_per_op'] for x in s]):.2f}", " rocks", f([x['cpu_us_per_op'] for x in k]), "med", f"{med([x['cpu_us_per_op'] for x in k]):.2f}")
    if ra[0].get('os_write_bytes_per_logical') is not None:
        print("  os wr/logical ratio", f([x['os_write_bytes_per_logical'] for x in ra]), "med", f"{med([x['os_write_bytes_per_logical'] for x in ra]):.3f}")
    print("  on disk ratio", f([x['db_bytes_on_disk'] for x in ra]), "med", f"{med([x['db_bytes_on_disk'] for x in ra]):.3f}")
    if ph=='read-random':
        print("  reads/op shale", f([x['reads_per_op'] for x in s]), " rocks", f([x['reads_per_op'] for x in k]))
print("rss over baseline MiB", [round(r['summary']['rss_peak_over_baseline_bytes']/2**20,1) for r in runs])
print("buffer reads/get", [round(r['summary']['read_random_buffer_reads_per_op'],3) for r in runs], "basement", [round(r['summary']['read_random_basement_reads_per_op'],3) for r in runs], "buffered msgs/entry", [round(r['summary']['buffered_messages_per_entry'],3) for r in runs])
print("txn max", [round(r['summary']['txn_commits_per_sec_max_threads']) for r in runs])
