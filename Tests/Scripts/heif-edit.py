# HEIF files edited from heif-enc's: "hidden BIG SMALL OUT" puts BIG's parameter sets and picture
# in SMALL's item, behind a 5,000-byte first NAL unit; "items SRC OUT N" adds N hidden Exif items
# of a byte each; "extents SRC OUT N [E] [D]" adds N Exif items, describing the picture unless D
# is 0, each of E (32) extents that are the whole file; "meta SRC OUT N" adds an N-byte colour
# profile to ipco.
import struct, sys
def boxes(data, start, end):
    out, at = [], start
    while at + 8 <= end:
        size, kind = struct.unpack(">I4s", data[at:at + 8])
        head = 8
        if size == 1: size, head = struct.unpack(">Q", data[at + 8:at + 16])[0], 16
        if size == 0: size = end - at
        out.append((kind, at, at + head, at + size))
        at += size
    return out
def child(data, parent, kind, skip=0):
    for k, s, p, e in boxes(data, parent[2] + skip, parent[3]):
        if k == kind: return (k, s, p, e)
def iloc_items(data, box):
    p = box[2]; version = data[p]; q = p + 4
    osz, lsz, bsz = data[q] >> 4, data[q] & 15, data[q + 1] >> 4
    isz = data[q + 1] & 15 if version in (1, 2) else 0
    q += 2
    count = int.from_bytes(data[q:q + (2 if version < 2 else 4)], "big"); q += 2 if version < 2 else 4
    items = []
    for _ in range(count):
        item = int.from_bytes(data[q:q + (2 if version < 2 else 4)], "big"); q += 2 if version < 2 else 4
        if version in (1, 2): q += 2
        q += 2
        base_at = q; base = int.from_bytes(data[q:q + bsz], "big"); q += bsz
        n = int.from_bytes(data[q:q + 2], "big"); q += 2
        extents = []
        for _ in range(n):
            q += isz
            off_at = q; off = int.from_bytes(data[q:q + osz], "big"); q += osz
            len_at = q; length = int.from_bytes(data[q:q + lsz], "big"); q += lsz
            extents.append((off_at, off, len_at, length))
        items.append((item, base_at, base, bsz, osz, lsz, extents))
    return items
def hvcc_nals(data, hvcc):
    p = hvcc[2]; q = p + 22; arrays = data[q]; q += 1; nals = []
    for _ in range(arrays):
        q += 1; n = int.from_bytes(data[q:q + 2], "big"); q += 2
        for _ in range(n):
            length = int.from_bytes(data[q:q + 2], "big"); q += 2
            nals.append(data[q:q + length]); q += length
    return nals
def grow_meta(data, inside, extra):
    # extra bytes put at the end of the box at path `inside` under meta (meta itself when
    # empty), every box around them made longer, and iloc's file offsets moved past them.
    data = bytearray(data)
    meta = [b for b in boxes(data, 0, len(data)) if b[0] == b"meta"][0]
    path = [meta]
    for kind in inside: path.append(child(data, path[-1], kind, 4 if len(path) == 1 else 0))
    target = path[-1]
    iloc = child(data, meta, b"iloc", 4)
    p = iloc[2]; version = data[p]; q = p + 4
    osz, bsz = data[q] >> 4, data[q + 1] >> 4
    lsz, isz = data[q] & 15, (data[q + 1] & 15 if version in (1, 2) else 0)
    q += 2
    wide = 2 if version < 2 else 4
    count = int.from_bytes(data[q:q + wide], "big"); q += wide
    for _ in range(count):
        q += wide
        method = 0
        if version in (1, 2): method = data[q + 1] & 15; q += 2
        q += 2
        if bsz:
            if method == 0: data[q:q + bsz] = (int.from_bytes(data[q:q + bsz], "big") + len(extra)).to_bytes(bsz, "big")
            q += bsz
        n = int.from_bytes(data[q:q + 2], "big"); q += 2
        for _ in range(n):
            q += isz
            if not bsz and method == 0: data[q:q + osz] = (int.from_bytes(data[q:q + osz], "big") + len(extra)).to_bytes(osz, "big")
            q += osz + lsz
    for box in path:
        data[box[1]:box[1] + 4] = struct.pack(">I", box[3] - box[1] + len(extra))
    end = target[3]
    return bytes(data[:end] + extra + data[end:]), target
mode = sys.argv[1]
if mode == "hidden":
    big, small, out = open(sys.argv[2], "rb").read(), open(sys.argv[3], "rb").read(), sys.argv[4]
    def parts(data):
        top = boxes(data, 0, len(data))
        meta = [b for b in top if b[0] == b"meta"][0]
        ipco = child(data, child(data, meta, b"iprp", 4), b"ipco")
        items = iloc_items(data, child(data, meta, b"iloc", 4))
        return top, meta, ipco, items
    btop, bmeta, bipco, bitems = parts(big)
    nals = hvcc_nals(big, child(big, bipco, b"hvcC"))
    item, base_at, base, bsz, osz, lsz, extents = bitems[0]
    picture = b"".join(big[base + off:base + off + length] for _, off, _, length in extents)
    filler = bytes([38 << 1, 1]) + b"\xff" * 5000
    stream = b"".join(struct.pack(">I", len(n)) + n for n in [filler] + nals) + picture
    top, meta, ipco, items = parts(small)
    mdat = [b for b in top if b[0] == b"mdat"][0]
    data = bytearray(small[:mdat[1]]) + struct.pack(">I4s", 8 + len(stream), b"mdat") + stream
    item, base_at, base, bsz, osz, lsz, extents = items[0]
    assert len(extents) == 1 and osz in (4, 8) and lsz in (4, 8)
    start = mdat[1] + 8
    if bsz: data[base_at:base_at + bsz] = start.to_bytes(bsz, "big"); start = 0
    off_at, _, len_at, _ = extents[0]
    data[off_at:off_at + osz] = start.to_bytes(osz, "big")
    data[len_at:len_at + lsz] = len(stream).to_bytes(lsz, "big")
    open(out, "wb").write(bytes(data))

else:
    source, out = open(sys.argv[2], "rb").read(), sys.argv[3]
    def iloc_layout(data):
        meta = [b for b in boxes(data, 0, len(data)) if b[0] == b"meta"][0]
        iloc = child(data, meta, b"iloc", 4)
        p = iloc[2]
        return iloc, data[p], data[p + 4] >> 4, data[p + 4] & 15, data[p + 5] >> 4, (data[p + 5] & 15 if data[p] in (1, 2) else 0)
    if mode == "items":
        # n hidden Exif items more, each one byte of the picture's data
        n = int(sys.argv[4])
        iloc, version, osz, lsz, bsz, isz = iloc_layout(source)
        assert version < 2
        p = iloc[2] + 8 + 2 + (2 if version else 0) + 2
        first = int.from_bytes(source[p:p + bsz], "big") + int.from_bytes(source[p + bsz + 2 + isz:p + bsz + 2 + isz + osz], "big")
        infe = b"".join(struct.pack(">I4sI", 21, b"infe", (2 << 24) | 1) + struct.pack(">HH4s", 1000 + i, 0, b"Exif") + b"\0"
                        for i in range(n))
        entry = lambda i, at: (struct.pack(">H", 1000 + i) + (b"\0\0" if version else b"") + b"\0\0" + at.to_bytes(bsz, "big")
                               + struct.pack(">H", 1) + bytes(isz) + (0 if bsz else at).to_bytes(osz, "big") + (1).to_bytes(lsz, "big"))
        entries = b"".join(entry(i, 0) for i in range(n))
        moved = first + len(infe) + len(entries)
        data, iinf = grow_meta(source, [b"iinf"], infe)
        p = iinf[2]
        assert data[p] == 0
        data = data[:p + 4] + struct.pack(">H", int.from_bytes(data[p + 4:p + 6], "big") + n) + data[p + 6:]
        data, iloc = grow_meta(data, [b"iloc"], b"".join(entry(i, moved) for i in range(n)))
        p = iloc[2] + 6
        data = data[:p] + struct.pack(">H", int.from_bytes(data[p:p + 2], "big") + n) + data[p + 2:]
    elif mode == "extents":
        # n Exif items more describing the picture (cdsc), each of `each` extents that are the
        # whole file: libheif 1.15 reads every item's data whole to open the file, and keeps
        # the metadata's, each x n times the file's size
        n, each = int(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else 32
        describing = len(sys.argv) <= 6 or sys.argv[6] != "0"
        meta = [b for b in boxes(source, 0, len(source)) if b[0] == b"meta"][0]
        assert child(source, meta, b"iref", 4) is None
        pitm = child(source, meta, b"pitm", 4)
        primary = int.from_bytes(source[pitm[2] + 4:pitm[2] + 6], "big")
        iref = struct.pack(">I4sI", 12 + 14 * n, b"iref", 0) + b"".join(
            struct.pack(">I4sHHH", 14, b"cdsc", 1000 + i, 1, primary) for i in range(n))
        if describing: source, _ = grow_meta(source, [], iref)
        iloc, version, osz, lsz, bsz, isz = iloc_layout(source)
        assert version < 2 and lsz >= 4
        infe = b"".join(struct.pack(">I4sI", 21, b"infe", (2 << 24) | 1) + struct.pack(">HH4s", 1000 + i, 0, b"Exif") + b"\0"
                        for i in range(n))
        entry = lambda i, length: (struct.pack(">H", 1000 + i) + (b"\0\0" if version else b"") + b"\0\0" + bytes(bsz)
                                   + struct.pack(">H", each) + (bytes(isz) + bytes(osz) + length.to_bytes(lsz, "big")) * each)
        total = len(source) + len(infe) + len(b"".join(entry(i, 0) for i in range(n)))
        data, iinf = grow_meta(source, [b"iinf"], infe)
        p = iinf[2]
        assert data[p] == 0
        data = data[:p + 4] + struct.pack(">H", int.from_bytes(data[p + 4:p + 6], "big") + n) + data[p + 6:]
        data, iloc = grow_meta(data, [b"iloc"], b"".join(entry(i, total) for i in range(n)))
        p = iloc[2] + 6
        data = data[:p] + struct.pack(">H", int.from_bytes(data[p:p + 2], "big") + n) + data[p + 2:]
        assert len(data) == total
    else:
        # a colour profile of n bytes in ipco, which libheif reads with the boxes
        n = int(sys.argv[4])
        data, _ = grow_meta(source, [b"iprp", b"ipco"], struct.pack(">I4s4s", 12 + n, b"colr", b"prof") + bytes(n))
    open(out, "wb").write(data)
