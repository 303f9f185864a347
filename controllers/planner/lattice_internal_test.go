package planner

import (
	"math/rand"
	"testing"
)

// TestClosures compares raise and lower with brute force: every vector in the box,
// the least (greatest) valid one, on random small pools with a valid corner, for the
// full and the open (lockstep) window.
func TestClosures(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for k := range 40000 {
		strict := int64(k % 2)
		n := 1 + rng.Intn(3)
		idx, r := make([]int, n), make([]int64, n)
		for i := range n {
			idx[i], r[i] = i, int64(1+rng.Intn(6))
		}
		corner := randomValid(rng, idx, r, strict)
		box := make([]int64, n)
		for i := range n {
			box[i] = int64(rng.Intn(int(corner[i]) + 1)) // lo <= corner
		}
		if got, want := raise(idx, r, box, corner, strict), bruteLeast(idx, r, box, corner, strict); !equal(got, want) {
			t.Fatalf("raise strict=%d R=%v lo=%v hi=%v: got %v want %v", strict, r, box, corner, got, want)
		}
		for i := range n {
			box[i] = corner[i] + int64(rng.Intn(4)) // hi >= corner
		}
		if got, want := lower(idx, r, corner, box, strict), bruteGreatest(idx, r, corner, box, strict); !equal(got, want) {
			t.Fatalf("lower strict=%d R=%v lo=%v hi=%v: got %v want %v", strict, r, corner, box, got, want)
		}
	}
}

func randomValid(rng *rand.Rand, idx []int, r []int64, strict int64) []int64 {
	for {
		v := make([]int64, len(r))
		for i := range v {
			v[i] = int64(rng.Intn(int(r[i]) + 2))
		}
		if validPool(idx, r, v, strict) {
			return v
		}
	}
}

// each calls f for every vector between lo and hi.
func each(lo, hi []int64, f func([]int64)) {
	v := append([]int64(nil), lo...)
	for {
		f(v)
		i := 0
		for ; i < len(v) && v[i] == hi[i]; i++ {
			v[i] = lo[i]
		}
		if i == len(v) {
			return
		}
		v[i]++
	}
}

func bruteLeast(idx []int, r, lo, hi []int64, strict int64) []int64 {
	best := append([]int64(nil), hi...)
	each(lo, hi, func(v []int64) {
		if validPool(idx, r, v, strict) {
			for i := range v {
				best[i] = min(best[i], v[i])
			}
		}
	})
	return best
}

func bruteGreatest(idx []int, r, lo, hi []int64, strict int64) []int64 {
	best := append([]int64(nil), lo...)
	each(lo, hi, func(v []int64) {
		if validPool(idx, r, v, strict) {
			for i := range v {
				best[i] = max(best[i], v[i])
			}
		}
	})
	return best
}

func equal(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
