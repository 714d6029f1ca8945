#include "textflag.h"

// func fromDeviceBarrier()
TEXT ·fromDeviceBarrier(SB), NOSPLIT, $0-0
	DSB $13 // DSB LD
	RET
