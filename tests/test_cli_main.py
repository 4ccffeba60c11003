from hosts.cli.main import main


def test_no_subcommand_prints_help_and_fails(capsys: object) -> None:
    assert main([]) == 2
