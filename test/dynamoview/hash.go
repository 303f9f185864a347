package dynamoview

import (
	"encoding/binary"
	"math/bits"
)

// InstanceIDMask keeps 53 bits of the hash so the id is exact as a JSON number
// (lib/runtime/src/discovery/kube/utils.rs, hash_pod_name: `& 0x001F_FFFF_FFFF_FFFF`).
const InstanceIDMask uint64 = 0x001F_FFFF_FFFF_FFFF

// InstanceID returns the Dynamo instance id of a discovery CR name (in pod discovery mode,
// the pod name), as KubeDiscoveryTarget::instance_id / hash_pod_name compute it
// (lib/runtime/src/discovery/kube/utils.rs): Rust's `DefaultHasher::new()` fed the `&str`
// and masked to 53 bits. DefaultHasher is SipHash-1-3 with keys (0, 0), and hashing a str
// writes its UTF-8 bytes followed by the byte 0xFF. The values in the tests were produced
// by rustc's std, so this matches the Rust toolchain the test vectors came from (std does
// not promise the algorithm is stable across releases).
func InstanceID(crName string) uint64 {
	msg := make([]byte, 0, len(crName)+1)
	msg = append(msg, crName...)
	msg = append(msg, 0xFF)
	return sipHash13(0, 0, msg) & InstanceIDMask
}

// sipHash13 is SipHash with 1 compression round and 3 finalization rounds.
func sipHash13(k0, k1 uint64, msg []byte) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573

	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}

	n := len(msg)
	full := n - n%8
	for i := 0; i < full; i += 8 {
		m := binary.LittleEndian.Uint64(msg[i:])
		v3 ^= m
		round()
		v0 ^= m
	}
	last := uint64(n&0xff) << 56
	for i, b := range msg[full:] {
		last |= uint64(b) << (8 * uint(i))
	}
	v3 ^= last
	round()
	v0 ^= last

	v2 ^= 0xff
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}
