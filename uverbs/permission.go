package uverbs

import "github.com/goverbs/goverbs/internal/devnode"

// accessAdvice says why the process may not open the uverbs character
// device at path and how to grant it, for the permission error of Open.
func accessAdvice(path string) string { return devnode.AccessAdvice(path, "uverbs*") }
