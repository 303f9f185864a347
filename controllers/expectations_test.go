package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestExpectations(t *testing.T) {
	now := time.Unix(0, 0)
	e := &expectations{now: func() time.Time { return now }}
	k := types.NamespacedName{Namespace: "ns", Name: "w"}
	if !e.satisfied(k, 3) {
		t.Fatal("nothing expected must be satisfied")
	}
	e.expect(k, 4)
	if e.satisfied(k, 3) {
		t.Fatal("a cache still showing 3 after writing 4 is stale")
	}
	if !e.satisfied(k, 4) {
		t.Fatal("the cache shows the write")
	}
	if !e.satisfied(k, 3) {
		t.Fatal("a met expectation is forgotten")
	}
	e.expect(k, 4)
	now = now.Add(expectationTTL)
	if !e.satisfied(k, 7) {
		t.Fatal("someone else wrote 7 over our 4: the expectation expires instead of wedging the DGD")
	}
}

func TestFreshness(t *testing.T) {
	now := time.Unix(0, 0)
	e := &expectations{now: func() time.Time { return now }}
	k := types.NamespacedName{Namespace: "ns", Name: "w"}
	if !e.fresh(k, 3, true) {
		t.Fatal("a synced status is fresh")
	}
	if e.fresh(k, 4, false) {
		t.Fatal("a status behind generation 4 is not fresh")
	}
	now = now.Add(expectationTTL / 2)
	if e.fresh(k, 4, false) {
		t.Fatal("still behind, within the TTL")
	}
	if e.fresh(k, 5, false) {
		t.Fatal("a newer generation starts its own wait")
	}
	now = now.Add(expectationTTL)
	if !e.fresh(k, 5, false) {
		t.Fatal("a status behind for the whole TTL is planned from as it is")
	}
	if len(e.unsynced) != 1 {
		t.Fatalf("older generations are forgotten: %v", e.unsynced)
	}
	e.forget(k)
	if len(e.unsynced) != 0 {
		t.Fatal("forget drops the freshness wait too")
	}
}
