//go:build !race

package planner_test

// raceScale is 1 without the race detector: every scenario runs.
const raceScale = 1
