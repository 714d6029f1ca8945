//go:build race

package mlx5

// raceEnabled: built with -race.
const raceEnabled = true
