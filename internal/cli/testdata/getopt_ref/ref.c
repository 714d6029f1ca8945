/* Prints the events glibc getopt_long returns for each argument vector read
   from stdin (arguments end in \x1f, vectors in \x1e). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

int main(int argc, char **argv) {
	int ibinfo = argc > 1 && !strcmp(argv[1], "ibinfo");
	static struct option devinfo_long[] = {
		{ .name = "ib-dev",   .has_arg = 1, .val = 'd' },
		{ .name = "ib-port",  .has_arg = 1, .val = 'i' },
		{ .name = "list",     .has_arg = 0, .val = 'l' },
		{ .name = "verbose",  .has_arg = 0, .val = 'v' },
		{ }
	};
	static struct option ibinfo_long[] = {
		{ .name = "ib-dev",   .has_arg = 1, .val = 'd' },
		{ .name = "ib-port",  .has_arg = 1, .val = 'i' },
		{ .name = "list",     .has_arg = 0, .val = 'l' },
		{ .name = "verbose",  .has_arg = 0, .val = 'v' },
		{ .name = "help",     .has_arg = 0, .val = 'h' },
		{ .name = "json",     .has_arg = 0, .val = 'j' },
		{ }
	};
	char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf - 1, stdin);
	buf[n] = 0;
	setvbuf(stdout, NULL, _IONBF, 0);
	dup2(1, 2);
	char *p = buf;
	while (p < buf + n) {
		char *end = strchr(p, '\x1e');
		if (!end) break;
		*end = 0;
		char *av[64]; int ac = 0;
		av[ac++] = "ibv_devinfo";
		char *q = p;
		while (*q) { char *e = strchr(q, '\x1f'); *e = 0; av[ac++] = q; q = e + 1; }
		av[ac] = NULL;
		pid_t pid = fork();
		if (pid == 0) {
			int c;
			while ((c = getopt_long(ac, av, ibinfo ? "d:i:lvh" : "d:i:lv", ibinfo ? ibinfo_long : devinfo_long, NULL)) != -1) {
				printf("EV %d ", c);
				if (c != '?' && optarg) { for (char *s = optarg; *s; s++) printf("%02x", (unsigned char)*s); }
				printf(" %d\n", c != '?' && optarg != NULL);
			}
			printf("END\n");
			exit(0);
		}
		waitpid(pid, NULL, 0);
		p = end + 1;
	}
	return 0;
}
