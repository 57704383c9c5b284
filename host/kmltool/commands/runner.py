"""The one pipeline of the commands that measure in VMs, as the README
describes it:

  configurations -> build -> specs -> boot -> combine -> render -> save
  -> exit status

A command describes its measurement as a Measurement: the configurations
it boots (configs.py), its build, its run specs (guestrun.Spec), how it
boots them, how it combines the runs into one dict, renders that as
Markdown and judges it.  run() runs one measurement, or a chain of them
(bench and demo: the path length lead, then the timings).

Before anything is built, the user's --append is merged with every
configuration of every measurement of the chain (configs.merge): a
conflict is an error that has cost nothing yet.  Then each measurement
builds what it needs, and then each measures, in order.

The rule for partial results: what was measured is always saved.  When a
boot fails as a whole (a console problem, a timeout, the guest script's
exit status: guestrun.Outcome.failed), the boots after it do not run; the
runs that came back are still combined, rendered and saved -- the JSON
with "partial": why, the Markdown led by a line that says so -- and the
command then returns the failed boot's exit status.  Only when nothing
usable came back (combine raises KmlError) is nothing saved.  Without a
failed boot the measurement's exit_status(data) decides.  In a chain, the
first measurement that returns a status other than 0 ends it.
"""
from .. import configs, guestrun, report
from ..paths import KmlError
from ..util import say
from .common import build_all, vm_options


class Measurement:
    what = ""               # the command, in messages
    prefix = ""             # saved as build/bench/PREFIXstamp.json and .md
    label = "results"       # what the saved files are, in the message naming them

    def __init__(self, a):
        """a: the parsed options.  Checks that need no build go here."""
        self.a = a

    def configs(self):
        """The configurations booted, merged with --append before the build."""
        return ()

    def who(self, config):
        """Who sets config's parameters, in a --append conflict."""
        return f"the {config.name} boot of {self.what}" if config.name else self.what

    def build(self):
        build_all()

    def specs(self):
        raise NotImplementedError

    def boot(self, specs):
        """The guestrun.Outcome of booting specs."""
        return guestrun.boot(specs, **vm_options(self.a))

    def combine(self, out):
        """The result (saved as JSON) of the runs of out, a guestrun.Outcome;
        a KmlError when there is none."""
        raise NotImplementedError

    def render(self, data):
        """data as Markdown."""
        raise NotImplementedError

    def exit_status(self, data):
        return 0

    def measure(self):
        """(data or None, the boot that failed as a whole or None)."""
        out = self.boot(self.specs())
        try:
            return self.combine(out), out.failed
        except KmlError as e:
            if not out.failed:
                raise
            say(f"{self.what}: nothing to save ({e})")
            return None, out.failed


def show_and_save(data, table, prefix="", label="results"):
    """Print a command's Markdown, save it with its JSON (report.save) and
    say where; the path stem."""
    print("\n" + table, end="", flush=True)
    stem = report.save(data, table, prefix=prefix)
    say(f"{label}: {stem}.json and {stem}.md")
    return stem


def finish(m, data, failed):
    """Render and save data (marked partial when a boot failed); the exit
    status."""
    if data is not None:
        if failed:
            data["partial"] = failed.failure
        table = m.render(data)
        if failed:
            table = f"**Partial results**: {failed.failure.splitlines()[0]}\n\n" + table
        show_and_save(data, table, m.prefix, m.label)
    if failed:
        say(f"{m.what} FAILED: {failed.failure}")
        return failed.code
    return m.exit_status(data)


def check_append(m):
    """--append merged with every configuration m boots: a KmlError on a
    conflict."""
    for c in m.configs():
        configs.merge(c, m.a.append, m.who(c))


def run(*measurements):
    """Check, build, then measure, save and judge each measurement in turn;
    the exit status of the first that fails, or 0."""
    for m in measurements:
        check_append(m)
    for m in measurements:
        m.build()
    for m in measurements:
        rc = finish(m, *m.measure())
        if rc:
            return rc
    return 0
