//go:build !goverbs_noproviders

package uverbs

// Every provider is linked in by default, so one import of uverbs opens any
// supported device.
import (
	_ "github.com/goverbs/goverbs/provider/mlx5"
	_ "github.com/goverbs/goverbs/provider/rxe"
)
