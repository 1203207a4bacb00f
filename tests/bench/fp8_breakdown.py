#!/usr/bin/env python3
# tests/bench/fp8_breakdown.py — where the gemm_fp8 error comes from, and the measured cost of the fp8 activation
# quantisation (the study behind the gemm_fp8 quantisation stage, weights/ACCURACY.md "issue 10").
#
#   tests/bench/fp8_breakdown.py --rows HELD_OUT.json...    # `neusight eval kernels G/gemm.csv --format json`
#   tests/bench/fp8_breakdown.py --slopes [--aic DIR]       # cycles per token row on each AIConfigurator GPU
#
# --rows: per held-out GPU, the gemm_fp8 MAPE by roofline time, by M, by measured time and by how much slower the
# fp8 row is than the bf16 row of the same shape (fp8 − bf16), with the share of the error and the sign.
# --slopes: fp8 time per token row from 16384 to 32768 tokens on tiny GEMMs (in, out ≤ 256), in cycles at the GPU
# file's boost clock: vLLM's dynamic per-tensor scaling ends its absmax reduction with one atomic per row on the
# single scale. Reads only the training GPUs' CSVs (no Hopper or L4 data exists there).
import argparse, collections, csv, json, os, statistics as st

AIC_GPUS = {  # folder: (GPU file, fp8 TFLOP/s, TB/s from the AIConfigurator README)
    'l40s': ('l40s', 733, .864), 'rtx_pro_6000_server': ('rtx_pro_6000_server', 936, 1.792),
    'b200_sxm': ('b200', 4500, 7.7), 'b300_sxm': ('b300_sxm', 4500, 7.75), 'gb200': ('gb200', 5000, 8.0),
    'gb300': ('gb300', 5000, 8.0)}


def boost_mhz(gpu_file):
    for line in open(os.path.join(os.path.dirname(__file__), '..', '..', 'gpus', gpu_file + '.toml')):
        if line.startswith('boost_clock_mhz'):
            return float(line.split('=')[1].split('#')[0])
    raise SystemExit(f'no boost_clock_mhz in gpus/{gpu_file}.toml')


def gemm_rows(path):
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    with open(path) as h:
        for x in csv.DictReader(h):
            out[x['gemm_dtype']][(int(x['m']), int(x['n']), int(x['k']))].append(float(x['latency']) * 1e3)  # us
    return {dt: {k: st.median(v) for k, v in d.items()} for dt, d in out.items()}


def slopes(aic):
    for d, (gf, _, _) in AIC_GPUS.items():
        fp8 = gemm_rows(os.path.join(aic, d, 'gemm.csv'))['fp8']
        mhz = boost_mhz(gf)
        s = [(fp8[(32768, n, k)] - fp8[(16384, n, k)]) / 16384 * mhz for n in (32, 64, 128, 256) for k in (32, 64, 128, 256)
             if (32768, n, k) in fp8 and (16384, n, k) in fp8]
        print(f'{d:22s} {st.median(s):5.1f} cycles per token row (range {min(s):.1f}-{max(s):.1f}, {len(s)} shapes,'
              f' boost {mhz:.0f} MHz)')


def breakdown(files):
    for jf in files:
        rows = [r for r in json.load(open(jf))['rows'] if r['family'] == 'gemm_fp8']
        path = rows[0]['where'].rsplit(':', 1)[0]
        folder = os.path.basename(os.path.dirname(path))
        _, p8, bw = AIC_GPUS[folder]
        lines = list(csv.reader(open(path)))
        ci = {h: i for i, h in enumerate(lines[0])}
        bf = gemm_rows(path).get('bfloat16', {})
        recs = []
        for r in rows:
            l = lines[int(r['where'].rsplit(':', 1)[1]) - 1]
            m, n, k = int(l[ci['m']]), int(l[ci['n']]), int(l[ci['k']])
            roof = max(2 * m * n * k / (p8 * 1e12), (m * k + n * k + 2 * m * n) / (bw * 1e12)) * 1e6
            meas, pred = r['measured_ms'] * 1e3, r['predicted_ms'] * 1e3
            recs.append(dict(m=m, roof=roof, meas=meas, ape=abs(pred - meas) / meas * 100, slow=pred > meas,
                             bf=bf.get((m, n, k))))
        tot = sum(x['ape'] for x in recs)
        print(f"== {rows[0]['gpu']}: {len(recs)} rows, MAPE {tot / len(recs):.1f}")

        def show(name, key, order):
            grp = collections.defaultdict(list)
            for x in recs:
                grp[key(x)].append(x)
            print(f'  by {name}:')
            for kk in order:
                xs = grp.get(kk)
                if not xs:
                    continue
                a = [x['ape'] for x in xs]
                r8 = [x['meas'] / x['bf'] for x in xs if x['bf']]
                print(f"    {kk:<14} n={len(xs):6d} ({len(xs) / len(recs) * 100:4.1f} %)  MAPE {sum(a) / len(a):6.1f}"
                      f"  median {st.median(a):5.1f}  share of error {sum(a) / tot * 100:5.1f} %"
                      f"  predicted too slow {sum(x['slow'] for x in xs) / len(xs) * 100:4.0f} %"
                      f"  fp8/bf16 measured {st.median(r8) if r8 else float('nan'):.2f}")

        def bucket(v, edges):
            for lo, hi in zip(edges, edges[1:]):
                if v < hi:
                    return f'{lo}-{hi}'
            return f'>={edges[-1]}'
        show('roofline us', lambda x: bucket(x['roof'], [0, 1, 10, 100, 1000]), ['0-1', '1-10', '10-100', '100-1000', '>=1000'])
        show('M (tokens)', lambda x: bucket(x['m'], [1, 18, 513, 4354]), ['1-18', '18-513', '513-4354', '>=4354'])
        show('measured us', lambda x: bucket(x['meas'], [0, 10, 40, 400]), ['0-10', '10-40', '40-400', '>=400'])
        show('fp8 - bf16 us', lambda x: 'no bf16 row' if not x['bf'] else 'fp8 faster' if x['meas'] < x['bf']
             else bucket(x['meas'] - x['bf'], [0, 5, 50]), ['fp8 faster', '0-5', '5-50', '>=50', 'no bf16 row'])


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description='gemm_fp8 error breakdown and fp8 quantisation cost per token row')
    ap.add_argument('--rows', nargs='*', default=[])
    ap.add_argument('--slopes', action='store_true')
    ap.add_argument('--aic', default=os.path.join(os.path.dirname(__file__), '..', '..', '..', 'shared', 'data', 'aiconfigurator'))
    a = ap.parse_args()
    if a.slopes:
        slopes(a.aic)
    breakdown(a.rows)
