//go:build race

package planner_test

// raceScale divides the random and exhaustive workloads under the race detector,
// which slows this allocation-heavy code about fivefold; the normal run does it all.
const raceScale = 4
