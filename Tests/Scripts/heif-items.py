# heif-items.py — HEIF files whose items make libheif 1.15 allocate as it opens them, and a
# grid whose alpha plane is a grid, made from a small heif-enc file (SRC). Modes:
#   deflate SRC OUT MIB     an XMP item compressed with deflate that inflates to MIB MiB
#   hvcc SRC OUT N MIB      N hidden hvc1 items sharing one hvcC of MIB MiB of NAL units, each
#                           describing the picture (libheif puts the NAL units before each
#                           item's data, and keeps the metadata's)
#   idat SRC OUT BYTES N    N Exif items in an idat of BYTES, each a first extent past the idat
#                           (which libheif leaves out, and reads on) and 31 of the whole idat
#   v1index SRC OUT BYTES   iloc version 1 with an index size, which libheif reads no index for:
#                           one Exif item of 16 extents of the whole BYTES-long file
#   gridalpha SRC OUT       a 2 x 2 grid of SRC's picture whose alpha plane is a 2 x 2 grid
# (The writer below comes from an earlier session's test helper.)
import struct, sys, zlib

import struct

def box(t, payload):
    return struct.pack('>I4s', 8 + len(payload), t) + payload
def fbox(t, v, f, payload):
    return box(t, bytes([v]) + f.to_bytes(3, 'big') + payload)

CONT = {b'meta': 4, b'iprp': 0, b'ipco': 0, b'dinf': 0, b'iinf': None}
def iter_boxes(buf, s, e):
    i = s
    while i + 8 <= e:
        size, t = struct.unpack('>I4s', buf[i:i+8]); h = 8
        if size == 1: size = struct.unpack('>Q', buf[i+8:i+16])[0]; h = 16
        elif size == 0: size = e - i
        yield t, i + h, i + size
        i += size

def child(buf, s, e, t):
    for tt, ps, pe in iter_boxes(buf, s, e):
        if tt == t: return ps, pe
    return None

class Item:
    def __init__(self, iid, typ, data=b'', props=None, name=b'', hidden=False):
        self.id = iid; self.type = typ; self.data = data
        self.props = props or []   # list of (boxbytes, essential)
        self.name = name; self.hidden = hidden
        self.extents = None        # optional list of split points for multiple extents
        self.idat = False

def parse(buf):
    """returns (items dict, primary id, irefs list of (type, from, [to]))"""
    ms, me = child(buf, 0, len(buf), b'meta'); ms += 4
    items = {}
    ps, pe = child(buf, ms, me, b'pitm'); primary = struct.unpack('>H', buf[ps+4:ps+6])[0]
    ps, pe = child(buf, ms, me, b'iinf')
    v = buf[ps]; n = struct.unpack('>H' if v == 0 else '>I', buf[ps+4:ps+6 if v == 0 else ps+8])[0]
    q = ps + (6 if v == 0 else 8)
    for t, a, b in iter_boxes(buf, q, pe):
        ver = buf[a]; flags = int.from_bytes(buf[a+1:a+4], 'big')
        if ver >= 2:
            if ver == 2: iid = struct.unpack('>H', buf[a+4:a+6])[0]; r = a + 6
            else: iid = struct.unpack('>I', buf[a+4:a+8])[0]; r = a + 8
            r += 2; typ = buf[r:r+4]; r += 4
            nm = buf[r:b].split(b'\0')[0]
            items[iid] = Item(iid, typ, name=nm, hidden=bool(flags & 1))
    # iloc
    ps, pe = child(buf, ms, me, b'iloc'); p = ps
    v = buf[p]; q = p + 4
    a, bb = buf[q], buf[q+1]; q += 2
    osz, lsz, bsz = a >> 4, a & 15, bb >> 4; isz = (bb & 15) if v in (1, 2) else 0
    if v < 2: n = struct.unpack('>H', buf[q:q+2])[0]; q += 2
    else: n = struct.unpack('>I', buf[q:q+4])[0]; q += 4
    def rd(sz):
        nonlocal q
        val = int.from_bytes(buf[q:q+sz], 'big') if sz else 0; q += sz; return val
    idat = child(buf, ms, me, b'idat')
    for _ in range(n):
        iid = rd(2 if v < 2 else 4)
        cm = 0
        if v in (1, 2): cm = rd(2) & 15
        rd(2); base = rd(bsz); ec = rd(2); data = b''
        for _ in range(ec):
            if isz: rd(isz)
            off = rd(osz); ln = rd(lsz)
            if cm == 1: data += buf[idat[0] + base + off: idat[0] + base + off + ln]
            else: data += buf[base + off: base + off + ln] if ln else buf[base+off:]
        if iid in items: items[iid].data = data
    # ipco / ipma
    ips, ipe = child(buf, ms, me, b'iprp')
    cs, ce = child(buf, ips, ipe, b'ipco')
    props = [buf[a-8:b] for t, a, b in iter_boxes(buf, cs, ce)]
    ms2, me2 = child(buf, ips, ipe, b'ipma')
    v = buf[ms2]; fl = int.from_bytes(buf[ms2+1:ms2+4], 'big')
    q = ms2 + 4; n = struct.unpack('>I', buf[q:q+4])[0]; q += 4
    for _ in range(n):
        if v < 1: iid = struct.unpack('>H', buf[q:q+2])[0]; q += 2
        else: iid = struct.unpack('>I', buf[q:q+4])[0]; q += 4
        c = buf[q]; q += 1
        for _ in range(c):
            if fl & 1: x = struct.unpack('>H', buf[q:q+2])[0]; q += 2; ess = x >> 15; idx = x & 0x7fff
            else: x = buf[q]; q += 1; ess = x >> 7; idx = x & 0x7f
            if iid in items and idx: items[iid].props.append((props[idx-1], bool(ess)))
    irefs = []
    r = child(buf, ms, me, b'iref')
    if r:
        rv = buf[r[0]]; q = r[0] + 4
        for t, a, b in iter_boxes(buf, q, r[1]):
            w = 2 if rv == 0 else 4
            fr = int.from_bytes(buf[a:a+w], 'big'); c = struct.unpack('>H', buf[a+w:a+w+2])[0]
            to = [int.from_bytes(buf[a+w+2+k*w:a+w+2+(k+1)*w], 'big') for k in range(c)]
            irefs.append((t, fr, to))
    return items, primary, irefs

def build(items, primary, irefs=(), brand=b'avif', extra_meta=b'', ftyp=None):
    items = list(items)
    if ftyp is None:
        compat = [b'mif1', b'miaf'] + ([b'avif'] if brand == b'avif' else [b'heic'])
        ftyp = box(b'ftyp', brand + b'\0\0\0\0' + b''.join(compat))
    hdlr = fbox(b'hdlr', 0, 0, b'\0'*4 + b'pict' + b'\0'*12 + b'\0')
    pitm = fbox(b'pitm', 0, 0, struct.pack('>H', primary))
    infes = b''.join(fbox(b'infe', 2, 1 if it.hidden else 0, struct.pack('>HH', it.id, 0) + it.type + it.name + b'\0') for it in items)
    iinf = fbox(b'iinf', 0, 0, struct.pack('>H', len(items)) + infes)
    iref = b''
    if irefs:
        iref = fbox(b'iref', 0, 0, b''.join(box(t, struct.pack('>HH', fr, len(to)) + b''.join(struct.pack('>H', x) for x in to)) for t, fr, to in irefs))
    # properties: dedupe
    plist = []
    assoc = []
    for it in items:
        a = []
        for pb, ess in it.props:
            if pb not in plist: plist.append(pb)
            a.append((plist.index(pb) + 1, ess))
        assoc.append((it.id, a))
    ipco = box(b'ipco', b''.join(plist))
    big = len(plist) > 127
    ipma_p = struct.pack('>I', len(assoc))
    for iid, a in assoc:
        ipma_p += struct.pack('>HB', iid, len(a))
        for idx, ess in a:
            ipma_p += struct.pack('>H', (0x8000 if ess else 0) | idx) if big else bytes([(0x80 if ess else 0) | idx])
    ipma = fbox(b'ipma', 0, 1 if big else 0, ipma_p)
    iprp = box(b'iprp', ipco + ipma)
    idat_items = [it for it in items if it.idat]
    idat_data = b''.join(it.data for it in idat_items)
    idat = box(b'idat', idat_data) if idat_items else b''
    def make_iloc(offsets):
        p = bytes([0x44, 0x00]) + struct.pack('>H', len(items))
        for it in items:
            exts = it.extents or [len(it.data)]
            p += struct.pack('>HHH', it.id, 1 if it.idat else 0, 0)
            p += struct.pack('>H', len(exts))
            o = offsets[it.id]; prev = 0
            for e in exts:
                p += struct.pack('>II', o + prev, e - prev); prev = e
        return fbox(b'iloc', 1, 0, p)
    dummy = {it.id: 0 for it in items}
    iloc_len = len(make_iloc(dummy))
    meta_len = 12 + len(hdlr) + len(pitm) + iloc_len + len(iinf) + len(iref) + len(iprp) + len(idat) + len(extra_meta)
    mdat_start = len(ftyp) + meta_len + 8
    offs = {}; o = mdat_start; io = 0
    for it in items:
        if it.idat: offs[it.id] = io; io += len(it.data)
        else: offs[it.id] = o; o += len(it.data)
    iloc = make_iloc(offs)
    meta = fbox(b'meta', 0, 0, hdlr + pitm + iloc + iinf + iref + iprp + idat + extra_meta)
    mdat = box(b'mdat', b''.join(it.data for it in items if not it.idat))
    return ftyp + meta + mdat

# property helpers
def ispe(w, h): return fbox(b'ispe', 0, 0, struct.pack('>II', w, h))
def pixi(*d): return fbox(b'pixi', 0, 0, bytes([len(d)] + list(d)))
def av1C(profile=0, level=8, tier=0, high=0, twelve=0, mono=0, sx=1, sy=1, csp=0, obus=b''):
    b1 = (profile << 5) | level
    b2 = (tier << 7) | (high << 6) | (twelve << 5) | (mono << 4) | (sx << 3) | (sy << 2) | csp
    return box(b'av1C', bytes([0x81, b1, b2, 0]) + obus)
def auxC(urn=b'urn:mpeg:mpegB:cicp:systems:auxiliary:alpha'): return fbox(b'auxC', 0, 0, urn + b'\0')
def grid_data(rows, cols, w, h):
    big = w > 65535 or h > 65535
    return bytes([0, 1 if big else 0, rows - 1, cols - 1]) + (struct.pack('>II', w, h) if big else struct.pack('>HH', w, h))
def get_prop(it, t):
    for pb, e in it.props:
        if pb[4:8] == t: return pb
    return None
def set_prop(it, t, new):
    it.props = [((new if pb[4:8] == t else pb), e) for pb, e in it.props if not (pb[4:8] == t and new is None)]

def parts(path):
    buf = open(path, 'rb').read()
    items, primary, _ = parse(buf)
    return buf, items, primary, items[primary]

def plain_meta(buf, pr, primary, infes, iref, iloc, idat=b''):
    ftyp = buf[:struct.unpack('>I', buf[:4])[0]]
    hdlr = fbox(b'hdlr', 0, 0, b'\0' * 4 + b'pict' + b'\0' * 12 + b'\0')
    pitm = fbox(b'pitm', 0, 0, struct.pack('>H', primary))
    iinf = fbox(b'iinf', 0, 0, struct.pack('>H', 1 + len(infes)) + fbox(b'infe', 2, 0, struct.pack('>HH', primary, 0) + pr.type + b'\0')
                + b''.join(infes))
    plist = [p for p, e in pr.props]
    ipma = fbox(b'ipma', 0, 0, struct.pack('>I', 1) + struct.pack('>HB', primary, len(plist))
                + bytes([(0x80 if e else 0) | (k + 1) for k, (p, e) in enumerate(pr.props)]))
    iprp = box(b'iprp', box(b'ipco', b''.join(plist)) + ipma)
    return ftyp, lambda at: fbox(b'meta', 0, 0, hdlr + pitm + iloc(at) + iinf + iref + iprp + idat)

mode, source, out = sys.argv[1], sys.argv[2], sys.argv[3]
buf, items, primary, pr = parts(source)
pr.id = primary
if mode == 'deflate':
    c = zlib.compressobj(9)
    z = b''.join(c.compress(bytes(1 << 20)) for _ in range(int(sys.argv[4]))) + c.flush()
    x = Item(2, b'mime', z, hidden=True)
    x.name = b'\0application/rdf+xml\0deflate'
    open(out, 'wb').write(build([pr, x], primary, [(b'cdsc', 2, [primary])], brand=b'heic'))
elif mode == 'hvcc':
    n, nal = int(sys.argv[4]), 65000
    count = int(float(sys.argv[5]) * (1 << 20)) // nal
    hv = get_prop(pr, b'hvcC')
    big = box(b'hvcC', hv[8:30] + bytes([1, 0x80 | 39]) + struct.pack('>H', count)
              + (struct.pack('>H', nal) + bytes([39 << 1, 1]) + bytes(nal - 2)) * count)
    its, irefs = [pr], []
    for k in range(n):
        it = Item(100 + k, b'hvc1', b'', [(big, True), (ispe(64, 64), False)], hidden=True)
        it.extents = []
        its.append(it)
        irefs.append((b'cdsc', 100 + k, [primary]))
    open(out, 'wb').write(build(its, primary, irefs, brand=b'heic'))
elif mode == 'idat':
    size, n = int(sys.argv[4]), int(sys.argv[5])
    ids = [1000 + i for i in range(n)]
    infes = [fbox(b'infe', 2, 1, struct.pack('>HH', i, 0) + b'Exif\0') for i in ids]
    iref = fbox(b'iref', 0, 0, b''.join(box(b'cdsc', struct.pack('>HHH', i, 1, primary)) for i in ids))
    idat = box(b'idat', b'\0\0\0\0Exif\0\0' + bytes(size - 10))
    def iloc(at):
        p = bytes([0x44, 0x00]) + struct.pack('>H', 1 + n)
        p += struct.pack('>HHHHII', primary, 0, 0, 1, at, len(pr.data))
        for i in ids:
            extents = [(0xFFFFFF00, 16)] + [(0, size)] * 31
            p += struct.pack('>HHHH', i, 1, 0, len(extents)) + b''.join(struct.pack('>II', o, l) for o, l in extents)
        return fbox(b'iloc', 1, 0, p)
    ftyp, meta = plain_meta(buf, pr, primary, infes, iref, iloc, idat)
    at = len(ftyp) + len(meta(0)) + 8
    open(out, 'wb').write(ftyp + meta(at) + box(b'mdat', pr.data))
elif mode == 'v1index':
    size = int(sys.argv[4])
    infes = [fbox(b'infe', 2, 1, struct.pack('>HH', 1000, 0) + b'Exif\0')]
    def iloc(at):
        # offset size 0, length 4, base offset 4, index 4: libheif reads lengths F, 0, F, 0...
        p = bytes([0x04, 0x44]) + struct.pack('>H', 2) + struct.pack('>HHHIH', primary, 0, 0, 0, 0)
        p += struct.pack('>HHHIH', 1000, 0, 0, 0, 32) + struct.pack('>II', size, 0) * 16 + bytes(128)
        return fbox(b'iloc', 1, 0, p)
    ftyp, meta = plain_meta(buf, pr, primary, infes, b'', iloc)
    head = ftyp + meta(0)
    open(out, 'wb').write(head + box(b'mdat', bytes(size - len(head) - 8)))
elif mode == 'gridalpha':
    w = struct.unpack('>II', get_prop(pr, b'ispe')[12:20])[0]
    config, size = get_prop(pr, b'hvcC'), ispe(w, w)
    alpha = fbox(b'auxC', 0, 0, b'urn:mpeg:hevc:2015:auxid:1\0')
    its = [Item(1, b'grid', grid_data(2, 2, 2 * w, 2 * w), [(ispe(2 * w, 2 * w), False)]),
           Item(2, b'grid', grid_data(2, 2, 2 * w, 2 * w), [(ispe(2 * w, 2 * w), False), (alpha, True)], hidden=True)]
    its += [Item(10 + k, pr.type, pr.data, [(config, True), (size, False)], hidden=True) for k in range(8)]
    irefs = [(b'dimg', 1, [10, 11, 12, 13]), (b'dimg', 2, [14, 15, 16, 17]), (b'auxl', 2, [1])]
    open(out, 'wb').write(build(its, 1, irefs, brand=b'heic'))
