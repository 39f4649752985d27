"""A class on the course's JupyterHub, driven in headless Chromium: release, fetch, validate, submit,
collect, grade (sandboxed, then by hand), feedback.

One instructor and two students on ``classroom/jupyterhub_config.py`` (a temporary copy of the course
holding unit 01, the fastest to grade). In the browser: the instructor generates and releases the
exercise in the formgrader; each student logs in, fetches it in the Assignments panel, opens it, writes
the written answer in the notebook, presses Validate and submits (JupyterLab asks nothing about news, the
notebook opens unmodified, and Validate shows the long failure line whole). Their code answers are written into
the fetched notebook on disk first (typing 70 lines into CodeMirror would test CodeMirror): ``student1``
the reference answers, ``student2`` the same with a wrong ``char_ngrams``. The instructor collects in the
formgrader, grades with ``python -m grader autograde`` (sandboxed), gives the written answers points and
a comment in the formgrader, makes the feedback with ``python -m grader feedback`` and releases it in
the formgrader; each student fetches it in the Assignments panel and reads it in JupyterLab.

The module's fixture plays the class once and records what each user saw; the tests check it. Where
no browser can run (``classroom_hub.browser_problem``) they skip and say why, unless
COURSE_REQUIRE_BROWSER=1 (``make test`` as root), where they fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from classroom_hub import CHROMIUM_ARGS, ROOT, Hub, browser_problem, chromium, saved_changes, wait_for

from grader.redact import hidden_test_lines
from grader.sandbox import UNSAFE_FLAG, sandbox_problem

UNIT = "01_tokenization"
WRONG_PART = "ngrams_answer"  # student2 returns [] from char_ngrams: its test cell earns nothing
WRONG_TEST = "ngrams_test"
# The visible test's failure for that answer: one line longer than nbgrader's 90-character width.
LONG_FAILURE = "char_ngrams('football', 3): got [], expected ['<fo', 'foo', 'oot', 'otb', 'tba', 'bal', 'all', 'll>']"
WRITTEN = "tradeoffs"  # the unit's written answer, graded by hand (3 points)
MANUAL = {"student1": 3, "student2": 1}
COMMENT = "Graded by hand in the formgrader: {student}, the axes are right."
INSTRUCTOR, STUDENTS, PASSWORD = "instructor", ["student1", "student2"], "class-of-2026"
PROBLEM = browser_problem()
SANDBOX = sandbox_problem() is None  # without one (not CI: it requires the sandbox) grading runs unconfined
TIMEOUT_MS = 120_000  # for anything that starts a server or runs a notebook on a busy 2-core machine


def test_a_browser_exists_where_the_test_command_requires_it():
    """`make test` sets COURSE_REQUIRE_BROWSER=1 where it can install Chromium and the proxy (Linux, as
    root), so that CI fails loudly instead of skipping the classroom's round trip."""
    if os.environ.get("COURSE_REQUIRE_BROWSER") != "1":
        pytest.skip("COURSE_REQUIRE_BROWSER is not set: the round trip skips where no browser can run")
    assert PROBLEM is None, f"no browser test possible here: {PROBLEM}"


@dataclass
class Seen:
    """What one user saw in the browser."""

    menu: list[str] = field(default_factory=list)  # the Nbgrader menu's entries
    side_panels: list[str] = field(default_factory=list)  # titles of the right side bar's tabs
    formgrader_status: int = 0  # HTTP status of /user/<name>/formgrader
    validation: str = ""  # the Validate dialog's text
    modified_on_open: bool = True  # whether the fetched notebook's tab showed unsaved changes before any typing
    news_prompt: bool = True  # whether JupyterLab asked about official Jupyter news
    changed_on_open: str = ""  # when modified on open: what JupyterLab's save changed in the file
    feedback: str = ""  # the feedback page as shown in JupyterLab


def answers(release: dict, wrong: bool) -> dict:
    """The fetched notebook with the reference answers of solutions/ in its code answer cells
    (``wrong``: char_ngrams returns an empty list)."""
    source = json.loads((ROOT / "solutions" / UNIT / f"{UNIT}.ipynb").read_text(encoding="utf-8"))
    reference = {
        c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"])
        for c in source["cells"]
        if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("solution")
    }
    for cell in release["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if cell["cell_type"] == "code" and grade_id in reference:
            code = re.sub(r"^\s*### (BEGIN|END) SOLUTION\n", "", reference[grade_id], flags=re.M)
            if wrong and grade_id == WRONG_PART:
                code += "\n\n\ndef char_ngrams(word, n_min=3, n_max=None):\n    return []\n"
            cell["source"] = code
    return release


def login(browser, hub: Hub, user: str):
    """A new browser context logged in as ``user``, on their JupyterLab once their server is up."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", PASSWORD)
    page.click("#login_submit")
    page.wait_for_url(f"**/user/{user}/lab**")
    page.wait_for_selector(".jp-LauncherCard")
    return page


def panels(page, hub: Hub, user: str) -> Seen:
    """The nbgrader entries this user's JupyterLab offers, and whether their server has a formgrader."""
    seen = Seen()
    page.locator(".lm-MenuBar-item", has_text="Nbgrader").click()
    page.wait_for_selector(".lm-Menu .lm-Menu-itemLabel >> text=Assignment List")
    seen.menu = [t for t in page.locator(".lm-Menu .lm-Menu-itemLabel").all_inner_texts() if t.strip()]
    page.keyboard.press("Escape")
    seen.side_panels = page.locator(".jp-SideBar.jp-mod-right .lm-TabBar-tab").evaluate_all(
        "tabs => tabs.map(t => t.getAttribute('title') || t.textContent)"
    )
    seen.formgrader_status = page.request.get(f"{hub.url}/user/{user}/formgrader").status
    return seen


def formgrader_action(page, hub: Hub, icon: str) -> str:
    """Press the button ``icon`` (a glyphicon class) in the unit's row of Manage Assignments; return
    the success dialog's text (an error dialog fails the test with its log)."""
    page.goto(f"{hub.url}/user/{INSTRUCTOR}/formgrader/manage_assignments")
    page.locator("tr", has_text=UNIT).locator(f".{icon}").click()
    dialog = page.wait_for_selector("#success-modal, #error-modal")
    text = dialog.inner_text()
    assert dialog.get_attribute("id") == "success-modal", text
    page.locator("#success-modal .modal-footer button").click()
    page.wait_for_selector("#success-modal", state="detached")
    return text


def assignments_panel(page):
    """Open (or bring forward) the Assignments panel of nbgrader's lab extension."""
    page.locator(".lm-MenuBar-item", has_text="Nbgrader").click()
    page.locator(".lm-Menu .lm-Menu-itemLabel", has_text="Assignment List").click()
    page.wait_for_selector("#released_assignments_list", state="visible")


def student_works(page, hub: Hub, student: str, seen: Seen) -> None:
    """Fetch, answer, validate and submit the unit as ``student``, in the browser."""
    assignments_panel(page)
    page.locator("#released_assignments_list .list_item", has_text=UNIT).get_by_role("button", name="Fetch").click()
    fetched = page.locator("#fetched_assignments_list .list_item", has_text=UNIT).first
    fetched.wait_for()
    path = hub.state / "home" / student / UNIT / f"{UNIT}.ipynb"
    notebook = answers(json.loads(path.read_text(encoding="utf-8")), wrong=student == "student2")
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")

    fetched.locator("a.assignment-notebooks-link").click()
    page.locator(f"#nbgrader-seqmodels-{UNIT} .nested_list_item a", has_text=UNIT).click()
    panel = page.locator(".jp-NotebookPanel:visible")
    # Once its kernel is idle JupyterLab has written the kernel's metadata into the notebook: modified or not.
    # (The tab may show the mark for a moment while the notebook loads; modified means it stays.)
    panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for()
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-current")
    try:
        wait_for(lambda: "jp-mod-dirty" not in (tab.get_attribute("class") or ""), 10, "the tab to show no change")
        seen.modified_on_open = False
    except TimeoutError:
        seen.modified_on_open = True
        seen.changed_on_open = saved_changes(page, panel, path, notebook)
    seen.news_prompt = page.get_by_text("official Jupyter news").count() > 0
    written = panel.locator(".jp-MarkdownCell", has_text="YOUR ANSWER HERE")
    written.dblclick()
    editor = written.locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(f"Characters never meet an unknown word; words are short; subwords balance both ({student}).")
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Control+S")
    wait_for(lambda: f"({student})" in path.read_text(encoding="utf-8"), 30, f"{student}'s written answer saved")

    panel.locator(".jp-Toolbar-item", has_text="Validate").click()
    dialog = page.locator(".jp-Dialog", has_text="Validation Results")
    dialog.locator(".validation-success, .validation-failed, .validation-error, .validation-changed").wait_for()
    seen.validation = dialog.inner_text()
    dialog.get_by_role("button", name="Ok").click()

    assignments_panel(page)
    page.locator("#fetched_assignments_list .list_item", has_text=UNIT).get_by_role(
        "button", name="Submit"
    ).first.click()
    page.locator("#submitted_assignments_list .list_item", has_text=UNIT).first.wait_for()


def grade_by_hand(page, hub: Hub, course: Path, submission_id: str, student: str) -> None:
    """Give the written answer its points and a comment in the formgrader; return once the gradebook has
    both (the page saves each field when it loses focus; leaving the page earlier would drop the save)."""
    page.goto(f"{hub.url}/user/{INSTRUCTOR}/formgrader/submissions/{submission_id}")
    # The page binds its fields to the grades and comments it fetches after loading: typed earlier, a value
    # is overwritten by the fetched (empty) one, or changes before anything listens.
    page.wait_for_function("() => window.formgrader && formgrader.grades.loaded && formgrader.comments.loaded")
    comment = page.locator(f"textarea#{WRITTEN}-comment")
    comment.fill(COMMENT.format(student=student))
    comment.press("Tab")
    score = page.locator(f"input.score#{WRITTEN}")
    score.fill(str(MANUAL[student]))
    score.press("Tab")
    wait_for(
        lambda: hand_graded(course, student) == (MANUAL[student], COMMENT.format(student=student)),
        30,
        f"the formgrader to save {student}'s score and comment",
    )


def student_reads_feedback(page, student: str, seen: Seen) -> None:
    """Fetch the feedback in the Assignments panel and open it in JupyterLab."""
    assignments_panel(page)
    item = page.locator("#submitted_assignments_list .list_item", has_text=UNIT).first
    item.get_by_role("button", name="Fetch Feedback").click()
    item.get_by_text("(view feedback)").click()
    page.locator(".jp-DirListing-item", has_text=f"{UNIT}.html").dblclick()
    frame = page.frame_locator(".jp-HTMLViewer:visible iframe")
    frame.locator("body", has_text="Score").wait_for()
    seen.feedback = frame.locator("body").inner_text()


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    """Play the class once; return (what each user saw, the gradebook's scores, the hidden test lines)."""
    if PROBLEM:
        if os.environ.get("COURSE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"COURSE_REQUIRE_BROWSER=1 but {PROBLEM}")
        pytest.skip(PROBLEM)
    from nbgrader.api import Gradebook
    from playwright.sync_api import sync_playwright

    course = tmp_path_factory.mktemp("course")
    for folder in ("solutions", "exercises"):
        shutil.copytree(ROOT / folder / UNIT, course / folder / UNIT)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    hub = Hub(tmp_path_factory.mktemp("hub"), course, [INSTRUCTOR], STUDENTS, PASSWORD)
    seen = {user: Seen() for user in [INSTRUCTOR, *STUDENTS]}
    try:
        hub.start()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS, timeout=60_000)
            try:
                teacher = login(browser, hub, INSTRUCTOR)
                seen[INSTRUCTOR] = panels(teacher, hub, INSTRUCTOR)
                formgrader_action(teacher, hub, "glyphicon-education")  # generate the student version
                formgrader_action(teacher, hub, "glyphicon-cloud-upload")  # release it to the exchange
                pages = {}
                for student in STUDENTS:
                    pages[student] = login(browser, hub, student)
                    seen[student] = panels(pages[student], hub, student)
                    student_works(pages[student], hub, student, seen[student])
                formgrader_action(teacher, hub, "glyphicon-cloud-download")  # collect
                run_grader(course, hub, "autograde", UNIT, *([] if SANDBOX else [UNSAFE_FLAG]))
                with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
                    ids = {s: gb.find_submission_notebook(UNIT, UNIT, s).id for s in STUDENTS}
                for student in STUDENTS:
                    grade_by_hand(teacher, hub, course, ids[student], student)
                run_grader(course, hub, "feedback", UNIT)
                formgrader_action(teacher, hub, "glyphicon-envelope")  # release the feedback
                for student in STUDENTS:
                    student_reads_feedback(pages[student], student, seen[student])
            except Exception:
                snapshots(browser, hub.state)
                raise
            finally:
                browser.close()
    except Exception as exc:
        raise AssertionError(
            f"{exc}\n(screenshots of every page: {hub.state}/failure-*.png)\n"
            f"--- end of the hub's log ---\n{hub.log_tail()}"
        ) from exc
    finally:
        hub.stop()
    return seen, scores(course), {student: hidden(student) for student in STUDENTS}


def snapshots(browser, folder: Path) -> None:
    """A screenshot of every open page into ``folder`` (failure-N.png), for whoever reads a failure."""
    for number, page in enumerate(p for context in browser.contexts for p in context.pages):
        try:
            page.screenshot(path=str(folder / f"failure-{number}.png"), timeout=10_000)
        except Exception as exc:  # a page that cannot be drawn must not hide the failure itself
            print(f"no screenshot of {page.url}: {exc}")


def hidden(student: str) -> list[str]:
    """The unit's hidden-test lines, but those the student's own notebook holds (the release and their
    answers: code a test shares with an answer is no secret)."""

    def text(nb: dict) -> str:
        return "\n".join("".join(c["source"]) for c in nb["cells"])

    source = json.loads((ROOT / "solutions" / UNIT / f"{UNIT}.ipynb").read_text(encoding="utf-8"))
    release = json.loads((ROOT / "exercises" / UNIT / f"{UNIT}.ipynb").read_text(encoding="utf-8"))
    return hidden_test_lines(text(source), visible=text(answers(release, wrong=student == "student2")))


def run_grader(course: Path, hub: Hub, *command: str) -> None:
    """``python -m grader COMMAND`` on ``course`` as the instructor runs it beside the hub (bounded in time)."""
    done = subprocess.run(
        [sys.executable, "-m", "grader", "--course", str(course), *command],
        env={**hub.instructor_env(), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"python -m grader {' '.join(command)}:\n{done.stdout}{done.stderr}"


def hand_graded(course: Path, student: str) -> tuple[float | None, str | None]:
    """The written answer's manual score and comment for ``student``, as the gradebook holds them now."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grade, comment = (find(WRITTEN, UNIT, UNIT, student) for find in (gb.find_grade, gb.find_comment))
        return grade.manual_score, comment.manual_comment


def scores(course: Path) -> dict[str, dict[str, float]]:
    """Each student's score per graded cell, plus ``"total"``, from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        result = {}
        for student in STUDENTS:
            notebook = gb.find_submission_notebook(UNIT, UNIT, student)
            result[student] = {g.name: g.score for g in notebook.grades} | {"total": notebook.score}
        return result


def test_students_see_the_student_panels_only(classroom):
    """Students get the Assignments panel and Validate, not the formgrader, course list or Create Assignment;
    the instructor gets all of them (so the checks below can fail)."""
    seen, _, _ = classroom
    teacher = seen[INSTRUCTOR]
    assert {"Assignment List", "Formgrader", "Create assignment", "Course List"} <= set(teacher.menu), teacher.menu
    assert any("Create Assignment" in t for t in teacher.side_panels), teacher.side_panels
    assert teacher.formgrader_status == 200
    for student in STUDENTS:
        assert seen[student].menu == ["Assignment List"], f"{student}: {seen[student].menu}"
        assert not any("Create Assignment" in t for t in seen[student].side_panels), seen[student].side_panels
        assert seen[student].formgrader_status == 404, f"{student}'s server serves the formgrader"


def test_validate_lists_the_failing_cell(classroom):
    seen, _, _ = classroom
    assert "Success! Your notebook passes all the tests." in seen["student1"].validation, seen["student1"].validation
    failed = seen["student2"].validation
    assert "The following cell failed" in failed, failed
    assert "Visible tests for char_ngrams" in failed, failed
    assert failed.count("The following cell failed") == 1, failed


def test_validate_shows_a_long_failure_message_whole(classroom):
    """The failure of student2's char_ngrams is one line of more than 90 characters: stock nbgrader cut such
    lines at 87 when printing them; the dialog must show it whole."""
    seen, _, _ = classroom
    assert len(LONG_FAILURE) > 90
    assert LONG_FAILURE in seen["student2"].validation, seen["student2"].validation


def test_jupyterlab_opens_quietly(classroom):
    """No news pop-up, and the fetched exercise is not marked modified before the student types."""
    seen, _, _ = classroom
    for student in STUDENTS:
        assert not seen[student].news_prompt, f"{student} was asked about official Jupyter news"
        assert not seen[student].modified_on_open, (
            f"{student}'s notebook opened marked modified; saved, it changed: {seen[student].changed_on_open}"
        )


def test_the_wrong_answer_scores_lower(classroom):
    _, scores, _ = classroom
    right, wrong = scores["student1"], scores["student2"]
    assert right[WRONG_TEST] == 2 and wrong[WRONG_TEST] == 0, (right, wrong)
    assert {k: v for k, v in right.items() if k not in (WRONG_TEST, WRITTEN, "total")} == {
        k: v for k, v in wrong.items() if k not in (WRONG_TEST, WRITTEN, "total")
    }
    assert right[WRITTEN] == MANUAL["student1"] and wrong[WRITTEN] == MANUAL["student2"]
    assert right["total"] == 23 and wrong["total"] == 23 - 2 - (MANUAL["student1"] - MANUAL["student2"])


def test_students_read_their_feedback_without_hidden_tests(classroom):
    seen, scores, hidden = classroom
    for student in STUDENTS:
        assert len(hidden[student]) > 10, f"unit 01 has hidden tests to keep out of the feedback: {hidden[student]}"
        page = seen[student].feedback
        assert COMMENT.format(student=student) in page, f"{student}: the formgrader's comment is missing"
        total = f"{UNIT} (Score: {float(scores[student]['total'])} / 23.0)"
        assert total in page, f"{student}: {total!r} is not in the feedback"
        leaked = [line for line in hidden[student] if line in page]
        assert not leaked, f"{student}'s feedback quotes hidden tests: {leaked[:3]}"
