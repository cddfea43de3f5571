// Package simulation holds the fault simulation's tests (TestSimulation,
// TestSimulationOutage: docs/reliability.md; TestSimulationShards: the same
// schedules with relect's shards and range shards, internal/sim/shards.go
// and checkranges.go) and, in
// internal/sim, the simulator they drive. A module of its own so that the
// library's go.mod does not carry what only the simulation needs
// (porcupine's linearizability checker); nothing here is API.
package simulation
