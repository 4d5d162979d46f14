"""Sticky PR comment client (vlmpath.github.comment) and `vlmpath comment`, against a fake GitHub."""

from __future__ import annotations

import pytest
from github_fake import BOT, HUMAN, TOKEN, FakeGitHub, github_fake  # noqa: F401  (fixture)
from log_scan import assert_inert, content_lines

from vlmpath import cli
from vlmpath.core.errors import VlmpathError
from vlmpath.github.comment import DEFAULT_MARKER, MAX_BODY_CHARS, CommentResult, upsert_comment
from vlmpath.github.rest import GitHubError

REPO, PR = "octo-org/bench", 7


class FakeSleep:
    """Records requested delays instead of sleeping."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, s: float) -> None:
        self.delays.append(s)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    # A proxy from the environment would intercept the requests to 127.0.0.1.
    for k in ("GITHUB_TOKEN", "GITHUB_API_URL", "http_proxy", "HTTP_PROXY", "all_proxy",
              "ALL_PROXY"):
        monkeypatch.delenv(k, raising=False)


def post(fake: FakeGitHub, body: str = "tok/s +3%", **kw) -> CommentResult:
    kw.setdefault("token", TOKEN)
    kw.setdefault("api_url", fake.url)
    kw.setdefault("sleep", FakeSleep())
    return upsert_comment(REPO, PR, body, **kw)


# --- create / update -------------------------------------------------------------------
def test_first_run_creates_comment_with_marker_and_headers(github_fake):
    github_fake.seed(PR, 3)
    res = post(github_fake, "| bench | Δ |")
    assert res.action == "created"
    [ours] = github_fake.marked(PR, DEFAULT_MARKER)
    assert ours["id"] == res.comment_id and ours["html_url"] == res.html_url
    assert ours["body"] == f"{DEFAULT_MARKER}\n| bench | Δ |"
    assert [r.method for r in github_fake.calls()] == ["GET", "POST"]
    get = github_fake.calls("GET")[0]
    assert get.path == f"/repos/{REPO}/issues/{PR}/comments" and get.query == {"per_page": "100"}
    h = github_fake.calls("POST")[0].headers
    assert h["authorization"] == f"Bearer {TOKEN}"
    assert h["accept"] == "application/vnd.github+json"
    assert h["x-github-api-version"] == "2022-11-28"
    assert h["user-agent"].startswith("vlmpath")


def test_second_run_updates_in_place(github_fake):
    first = post(github_fake, "run 1")
    second = post(github_fake, "run 2")
    assert (first.action, second.action) == ("created", "updated")
    assert second.comment_id == first.comment_id
    [ours] = github_fake.marked(PR, DEFAULT_MARKER)
    assert ours["body"].endswith("run 2") and "run 1" not in ours["body"]
    assert len(github_fake.calls("POST")) == 1
    [patch] = github_fake.calls("PATCH")
    assert patch.path == f"/repos/{REPO}/issues/comments/{first.comment_id}"
    assert patch.body == {"body": f"{DEFAULT_MARKER}\nrun 2"}


def test_body_already_carrying_marker_is_kept_and_custom_marker_used(github_fake):
    post(github_fake, "x", marker="<!-- other -->")
    res = post(github_fake, "head <!-- mine --> tail", marker="<!-- mine -->")
    assert res.action == "created"  # another marker is a different sticky comment
    [mine] = github_fake.marked(PR, "<!-- mine -->")
    assert mine["body"] == "head <!-- mine --> tail"
    assert len(github_fake.comments[PR]) == 2


def test_marker_on_page_two_is_found_without_duplicate(github_fake):
    github_fake.seed(PR, 150)
    github_fake.seed(PR, 1, body=f"{DEFAULT_MARKER}\nold", user=BOT)
    github_fake.seed(PR, 20)
    res = post(github_fake, "new")
    assert res.action == "updated"
    gets = [g for g in github_fake.calls("GET") if g.path != "/user"]
    assert [g.query.get("page") for g in gets] == [None, "2"]
    assert all(g.query["per_page"] == "100" for g in gets)
    assert github_fake.calls("POST") == []
    [ours] = github_fake.marked(PR, DEFAULT_MARKER)
    assert ours["body"].endswith("new")
    assert len(github_fake.comments[PR]) == 171


def test_no_marker_in_any_page_creates_after_reading_all_pages(github_fake):
    github_fake.seed(PR, 250)
    assert post(github_fake).action == "created"
    assert [g.query.get("page") for g in github_fake.calls("GET")] == [None, "2", "3"]


def test_several_marked_comments_update_the_first_only(github_fake):
    github_fake.seed(PR, 2, body=f"{DEFAULT_MARKER} dup", user=BOT)
    first_id = github_fake.comments[PR][0]["id"]
    res = post(github_fake, "fresh")
    assert res.comment_id == first_id and res.action == "updated"
    bodies = [c["body"] for c in github_fake.comments[PR]]
    assert bodies == [f"{DEFAULT_MARKER}\nfresh", f"{DEFAULT_MARKER} dup"]


# --- retries ---------------------------------------------------------------------------
def test_502_twice_then_success_backs_off_exponentially(github_fake):
    github_fake.fail_next(2, 502, message="Server Error")
    sleep = FakeSleep()
    res = post(github_fake, sleep=sleep, backoff_s=1.0)
    assert res.action == "created"
    assert sleep.delays == [1.0, 2.0]
    assert [r.method for r in github_fake.calls()] == ["GET", "GET", "GET", "POST"]


def test_persistent_5xx_gives_up_after_max_retries_with_capped_delays(github_fake):
    github_fake.fail_next(10, 503)
    sleep = FakeSleep()
    with pytest.raises(GitHubError, match=r"HTTP 503.*after 4 retries") as ei:
        post(github_fake, sleep=sleep, max_retries=4, backoff_s=1.0, max_delay_s=5.0)
    assert sleep.delays == [1.0, 2.0, 4.0, 5.0]
    assert ei.value.status == 503
    assert len(github_fake.calls()) == 5


def test_rate_limit_403_honours_retry_after(github_fake):
    github_fake.fail_next(
        1, 403, headers={"x-ratelimit-remaining": "0", "Retry-After": "1"},
        message="API rate limit exceeded",
    )
    sleep = FakeSleep()
    assert post(github_fake, sleep=sleep, backoff_s=7.0).action == "created"
    assert sleep.delays == [1.0]


def test_429_retry_after_is_capped(github_fake):
    github_fake.fail_next(1, 429, headers={"Retry-After": "3600"})
    sleep = FakeSleep()
    post(github_fake, sleep=sleep, max_delay_s=30.0)
    assert sleep.delays == [30.0]


def test_rate_limit_reset_header_is_used_when_no_retry_after(github_fake):
    github_fake.fail_next(
        1, 403, headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1700000012"}
    )
    sleep = FakeSleep()
    post(github_fake, sleep=sleep, clock=lambda: 1_700_000_000.0)
    assert sleep.delays == [12.0]


def test_failed_create_that_was_stored_is_not_duplicated(github_fake):
    # The server stores the comment but answers 502: a blind re-POST would post it twice.
    github_fake.fail_next(1, 502, method="POST", apply_first=True)
    sleep = FakeSleep()
    res = post(github_fake, "only once", sleep=sleep)
    assert res.action == "updated"
    [ours] = github_fake.marked(PR, DEFAULT_MARKER)
    assert ours["id"] == res.comment_id and ours["body"].endswith("only once")
    assert [(r.method, r.path.rsplit("/", 1)[-1]) for r in github_fake.calls()] == [
        ("GET", "comments"), ("POST", "comments"), ("GET", "comments"), ("GET", "user"), ("PATCH", str(res.comment_id))]
    assert sleep.delays == [1.0]


def test_failed_create_that_was_not_stored_is_posted_again(github_fake):
    github_fake.fail_next(1, 503, method="POST")
    sleep = FakeSleep()
    assert post(github_fake, sleep=sleep).action == "created"
    assert len(github_fake.marked(PR, DEFAULT_MARKER)) == 1
    assert [r.method for r in github_fake.calls()] == ["GET", "POST", "GET", "POST"]


# --- clear errors ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("setup", "expect"),
    [
        (
            lambda f: f.fail_next(1, 401, message="Bad credentials"),
            r"401.*token missing or invalid.*GITHUB_TOKEN",
        ),
        (lambda f: setattr(f, "read_only", True), r"403.*pull-requests: write.*workflow_run"),
        (
            lambda f: f.fail_next(1, 404, message="Not Found"),
            r"404.*repo or PR not found.*--repo owner/name.*--pr",
        ),
        (lambda f: f.fail_next(1, 422, message="Validation Failed"), r"422.*Validation Failed"),
    ],
    ids=["401", "403-readonly", "404", "422"],
)
def test_client_errors_are_clear_not_retried_and_never_leak_token(
    github_fake, capsys, setup, expect
):
    setup(github_fake)
    sleep = FakeSleep()
    with pytest.raises(GitHubError, match=expect) as ei:
        post(github_fake, sleep=sleep)
    assert sleep.delays == []
    out, err = capsys.readouterr()
    for text in (str(ei.value), repr(ei.value), out, err):
        assert TOKEN not in text


def test_wrong_token_gets_401_from_server(github_fake):
    with pytest.raises(GitHubError, match="401"):
        post(github_fake, token="ghp_wrong")


def test_unknown_pr_is_404(github_fake):
    with pytest.raises(GitHubError, match="repo or PR not found"):
        upsert_comment(REPO, 99, "x", token=TOKEN, api_url=github_fake.url, sleep=FakeSleep())


def test_token_echoed_by_server_is_redacted(github_fake):
    github_fake.fail_next(6, 500, message=f"boom for Bearer {TOKEN}")
    with pytest.raises(GitHubError) as ei:
        post(github_fake, max_retries=1)
    assert TOKEN not in str(ei.value) and "***" in str(ei.value)


def test_token_not_in_client_repr(github_fake):
    from vlmpath.github.rest import Client

    c = Client(github_fake.url, TOKEN, 0, 1.0, 1.0, FakeSleep(), lambda: 0.0)
    assert TOKEN not in repr(c)


@pytest.mark.parametrize(
    ("repo", "pr", "body", "token", "match"),
    [
        ("octo-org", PR, "x", TOKEN, "owner/name"),
        ("a/b/c", PR, "x", TOKEN, "owner/name"),
        ("../bench", PR, "x", TOKEN, "owner/name"),
        (REPO, 0, "x", TOKEN, "positive integer"),
        (REPO, True, "x", TOKEN, "positive integer"),
        (REPO, PR, "x" * MAX_BODY_CHARS, TOKEN, "over GitHub's limit of 65536"),
        (REPO, PR, "x", None, "token missing.*GITHUB_TOKEN"),
        (REPO, PR, "x", "ghp_a b", "whitespace"),
    ],
)
def test_bad_input_fails_before_any_request(github_fake, repo, pr, body, token, match):
    with pytest.raises(GitHubError, match=match) as ei:
        upsert_comment(repo, pr, body, token=token, api_url=github_fake.url)
    assert github_fake.calls() == []
    if token:
        assert token not in str(ei.value)


def test_body_exactly_at_limit_is_accepted(github_fake):
    body = DEFAULT_MARKER + "x" * (MAX_BODY_CHARS - len(DEFAULT_MARKER))
    assert post(github_fake, body).action == "created"


def test_token_and_api_url_come_from_env(github_fake, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", github_fake.url + "/")
    res = upsert_comment(REPO, PR, "env", sleep=FakeSleep())
    assert res.action == "created"
    # An explicit (wrong) token overrides the environment.
    with pytest.raises(GitHubError, match="401"):
        upsert_comment(REPO, PR, "env", token="ghp_other", sleep=FakeSleep())


def test_next_link_to_another_host_is_refused():
    fake, other = FakeGitHub().start(), FakeGitHub().start()
    try:
        fake.link_base = other.url
        fake.seed(PR, 120)
        with pytest.raises(GitHubError, match="refusing to send the token"):
            post(fake)
        assert other.calls() == []  # the token never reached the other origin
    finally:
        fake.stop()
        other.stop()


# --- CLI -------------------------------------------------------------------------------
@pytest.fixture
def body_file(tmp_path):
    p = tmp_path / "comment.md"
    p.write_text("## vlmpath\n| bench | Δ |\n", encoding="utf-8")
    return p


def cli_args(body_file, *extra):
    return ["comment", "--repo", REPO, "--pr", str(PR), "--body-file", str(body_file), *extra]


def test_cli_creates_then_updates(github_fake, body_file, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", github_fake.url)
    assert cli.main(cli_args(body_file)) == 0
    [ours] = github_fake.marked(PR, DEFAULT_MARKER)
    assert capsys.readouterr().out.strip() == f"created comment {ours['html_url']}"
    body_file.write_text("second", encoding="utf-8")
    assert cli.main(cli_args(body_file)) == 0
    out, err = capsys.readouterr()
    assert out.strip() == f"updated comment {ours['html_url']}"
    [ours] = github_fake.marked(PR, DEFAULT_MARKER)
    assert ours["body"] == f"{DEFAULT_MARKER}\nsecond"
    assert TOKEN not in out + err


def test_cli_dry_run_needs_no_token_and_sends_nothing(github_fake, body_file, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_API_URL", github_fake.url)
    assert cli.main(cli_args(body_file, "--dry-run", "--marker", "<!-- m -->")) == 0
    out = capsys.readouterr().out
    assert "dry run" in out and f"{REPO}#{PR}" in out and github_fake.url in out
    assert "<!-- m -->\n## vlmpath" in out
    assert github_fake.calls() == []


def test_cli_dry_run_defaults_to_public_api(body_file, capsys):
    assert cli.main(cli_args(body_file, "--dry-run")) == 0
    assert "https://api.github.com" in capsys.readouterr().out


def test_cli_errors_exit_2_with_fix_and_no_token(github_fake, body_file, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", github_fake.url)
    github_fake.read_only = True
    assert cli.main(cli_args(body_file)) == 2
    out, err = capsys.readouterr()
    assert "workflow_run" in err and TOKEN not in out + err


def test_cli_missing_token_and_missing_file(github_fake, body_file, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_API_URL", github_fake.url)
    assert cli.main(cli_args(body_file)) == 2
    assert "GITHUB_TOKEN" in capsys.readouterr().err
    assert cli.main(cli_args(body_file.parent / "nope.md")) == 2
    assert "--body-file" in capsys.readouterr().err
    assert github_fake.calls() == []


def test_a_refusal_is_the_projects_error_one_line_and_exit_2(github_fake, body_file, monkeypatch, capsys):
    # Callers catch VlmpathError, never GitHubError by name: a refusal must be one, carry
    # its status, and reach the user as one line and exit 2 (not a traceback).
    github_fake.fail_next(1, 404, message="Not Found")
    with pytest.raises(VlmpathError) as e:
        post(github_fake)
    assert isinstance(e.value, GitHubError) and e.value.status == 404
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", github_fake.url)
    github_fake.fail_next(1, 404, message="Not Found")
    assert cli.main(cli_args(body_file)) == 2
    err = capsys.readouterr().err
    assert_inert(err)  # the comment job's log: fenced (render.job_log)
    lines = content_lines(err)
    assert lines[0].startswith("vlmpath comment: error: ") and len(lines) == 1 and "404" in err, err
    assert github_fake.marked(PR, DEFAULT_MARKER) == []


# --- whose comment is ours -------------------------------------------------------------
def test_a_person_quoting_the_marker_is_never_overwritten(github_fake):
    github_fake.seed(PR, 1, body=f"why does {DEFAULT_MARKER} say this?", user=HUMAN)
    res = post(github_fake, "numbers")
    assert res.action == "created"
    assert github_fake.comments[PR][0]["body"] == f"why does {DEFAULT_MARKER} say this?"
    assert post(github_fake, "newer").comment_id == res.comment_id  # then our own is updated
    # An Actions token cannot read /user (403): its comments are github-actions[bot]'s.
    assert [r.path for r in github_fake.calls("GET")].count("/user") == 2


def test_the_tokens_user_or_author_decides_whose_comment_is_ours(github_fake):
    me = {"login": "bench-bot", "id": 9, "type": "User"}
    github_fake.token_user = me
    github_fake.seed(PR, 1, body=f"{DEFAULT_MARKER}\nby the Actions bot", user=BOT)
    github_fake.seed(PR, 1, body=f"{DEFAULT_MARKER}\nmine", user=me)
    assert post(github_fake, "x").comment_id == github_fake.comments[PR][1]["id"]
    assert post(github_fake, "y", author=BOT["login"]).comment_id == github_fake.comments[PR][0]["id"]


def test_secondary_rate_limit_403_with_retry_after_waits_and_retries(github_fake):
    github_fake.fail_next(1, 403, headers={"Retry-After": "7"},
                          message="You have exceeded a secondary rate limit. Please wait a few minutes")
    sleep = FakeSleep()
    assert post(github_fake, sleep=sleep, backoff_s=1.0).action == "created"
    assert sleep.delays == [7.0]


def test_secondary_rate_limit_without_headers_waits_a_minute_bounded(github_fake):
    github_fake.fail_next(3, 403, message="You have exceeded a secondary rate limit")
    sleep = FakeSleep()
    with pytest.raises(GitHubError, match=r"HTTP 403 rate limited.*after 2 retries"):
        post(github_fake, sleep=sleep, max_retries=2, max_delay_s=45.0)
    assert sleep.delays == [45.0, 45.0]
    # A plain permission 403 is still not retried.
    github_fake.read_only = True
    with pytest.raises(GitHubError, match=r"403.*pull-requests: write"):
        post(github_fake, sleep=(s := FakeSleep()))
    assert s.delays == []
